/*
 * audit.c: audit rows (id, ts, content, attrs, created_xid) packed into a block and unpacked
 * from one; the payload's layout is described at the top of shardlog_segments.c.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "mb/pg_wchar.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/xid8.h"

#include "segments.h"

PG_FUNCTION_INFO_V1(shardlog_pack_audit);
PG_FUNCTION_INFO_V1(shardlog_unpack_audit);
PG_FUNCTION_INFO_V1(shardlog_block_rows);

#define AUDIT_COLUMNS 6

Datum
shardlog_pack_audit(PG_FUNCTION_ARGS)
{
	int			rows,
				count;
	bool	   *id_nulls,
			   *ts_nulls,
			   *content_nulls,
			   *attrs_nulls,
			   *xid_nulls;
	Datum	   *ids = array_elements(PG_GETARG_ARRAYTYPE_P(0), INT8OID, "ids", &id_nulls, &rows);
	Datum	   *stamps,
			   *contents,
			   *attrs,
			   *xids;
	int			level = PG_GETARG_INT32(5);
	StringInfoData payload;
	StringInfoData texts;
	StringInfoData attr_lengths;
	uint64		previous;
	MemoryContext row_context,
				outer;

	stamps = array_elements(PG_GETARG_ARRAYTYPE_P(1), TIMESTAMPTZOID, "ts", &ts_nulls, &count);
	require_length(count, rows, "ts");
	contents = array_elements(PG_GETARG_ARRAYTYPE_P(2), TEXTOID, "contents", &content_nulls, &count);
	require_length(count, rows, "contents");
	attrs = array_elements(PG_GETARG_ARRAYTYPE_P(3), JSONBOID, "attrs", &attrs_nulls, &count);
	require_length(count, rows, "attrs");
	xids = array_elements(PG_GETARG_ARRAYTYPE_P(4), XID8OID, "xids", &xid_nulls, &count);
	require_length(count, rows, "xids");
	require_no_nulls(id_nulls, rows, "ids");
	require_no_nulls(ts_nulls, rows, "ts");
	require_no_nulls(content_nulls, rows, "contents");

	initStringInfo(&payload);
	put_varint(&payload, (uint64) rows);
	previous = 0;
	for (int row = 0; row < rows; row++)
	{
		uint64		value = (uint64) DatumGetTimestampTz(stamps[row]);

		put_zigzag(&payload, (int64) (value - previous));
		previous = value;
	}
	previous = 0;
	for (int row = 0; row < rows; row++)
	{
		uint64		value = (uint64) DatumGetInt64(ids[row]);

		put_zigzag(&payload, (int64) (value - previous));
		previous = value;
	}
	put_null_bitmap(&payload, xid_nulls, rows);
	previous = 0;
	for (int row = 0; row < rows; row++)
	{
		uint64		value;

		if (xid_nulls[row])
			continue;
		value = U64FromFullTransactionId(DatumGetFullTransactionId(xids[row]));
		put_zigzag(&payload, (int64) (value - previous));
		previous = value;
	}

	/* attrs: the bitmap and lengths go to the payload now, their text after the contents' lengths. */
	put_null_bitmap(&payload, attrs_nulls, rows);
	initStringInfo(&texts);
	initStringInfo(&attr_lengths);
	row_context = AllocSetContextCreate(CurrentMemoryContext, "shardlog_pack_audit row",
										ALLOCSET_SMALL_SIZES);
	for (int row = 0; row < rows; row++)
	{
		char	   *text;
		size_t		length;

		if (attrs_nulls[row])
			continue;
		outer = MemoryContextSwitchTo(row_context);
		text = DatumGetCString(DirectFunctionCall1(jsonb_out, attrs[row]));
		length = strlen(text);
		MemoryContextSwitchTo(outer);
		put_varint(&attr_lengths, length);
		appendBinaryStringInfo(&texts, text, (int) length);
		MemoryContextReset(row_context);
	}
	MemoryContextDelete(row_context);
	appendBinaryStringInfo(&payload, attr_lengths.data, attr_lengths.len);
	for (int row = 0; row < rows; row++)
		put_varint(&payload, VARSIZE_ANY_EXHDR(DatumGetPointer(contents[row])));
	appendBinaryStringInfo(&payload, texts.data, texts.len);
	for (int row = 0; row < rows; row++)
	{
		struct varlena *content = (struct varlena *) DatumGetPointer(contents[row]);

		appendBinaryStringInfo(&payload, VARDATA_ANY(content), (int) VARSIZE_ANY_EXHDR(content));
	}

	PG_RETURN_BYTEA_P(segment_seal(SEGMENT_KIND_AUDIT, (uint32) rows, &payload, level));
}

/* A length, at most the payload's (so that at most 2^30 of them cannot wrap a 64-bit sum). */
static uint64
take_length(SegmentReader *reader, uint32 payload_length)
{
	uint64		length = take_varint(reader);

	if (length > payload_length)
		segment_corrupt("length beyond the payload");
	return length;
}

/* A content, refused unless it is text of the database's encoding (no NUL byte). */
static Datum
content_datum(const uint8 *bytes, uint64 length)
{
	if (!pg_verifymbstr((const char *) bytes, (int) length, true))
		segment_corrupt("content is not text of the database's encoding");
	return PointerGetDatum(cstring_to_text_with_len((const char *) bytes, (int) length));
}

/*
 * An attrs value from its jsonb text. Blocks carry a checksum, so text that jsonb_in refuses
 * was crafted or damaged before packing: reported as corruption, not as the caller's bad input.
 */
static Datum
attrs_datum(const uint8 *bytes, uint64 length)
{
	char	   *text = palloc(length + 1);
	MemoryContext context = CurrentMemoryContext;
	Datum		value = (Datum) 0;

	memcpy(text, bytes, length);
	text[length] = '\0';
	if (!pg_verifymbstr(text, (int) length, true))
		segment_corrupt("attrs is not text of the database's encoding");
	PG_TRY();
	{
		value = DirectFunctionCall1(jsonb_in, CStringGetDatum(text));
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		FlushErrorState();
		segment_corrupt("attrs is not jsonb text");
	}
	PG_END_TRY();
	return value;
}

Datum
shardlog_unpack_audit(PG_FUNCTION_ARGS)
{
	bytea	   *block = PG_GETARG_BYTEA_PP(0);
	ReturnSetInfo *result = (ReturnSetInfo *) fcinfo->resultinfo;
	uint32		rows,
				payload_length,
				xid_nulls,
				attr_nulls;
	SegmentReader reader;
	SegmentReader stamps,
				ids,
				xids,
				attr_lengths,
				content_lengths;
	const uint8 *xid_bitmap,
			   *attr_bitmap;
	uint64		attr_total = 0,
				content_total = 0;
	const uint8 *attr_text,
			   *content_bytes;
	uint64		ts = 0,
				id = 0,
				xid = 0;
	MemoryContext row_context,
				outer;
	Datum		values[AUDIT_COLUMNS];
	bool		nulls[AUDIT_COLUMNS];
	bool		bounded = PG_NARGS() == 3;
	TimestampTz from_ts = bounded ? PG_GETARG_TIMESTAMPTZ(1) : 0;
	TimestampTz to_ts = bounded ? PG_GETARG_TIMESTAMPTZ(2) : 0;

	/*
	 * The executor's own row type, not get_call_result_type(): that one leaves ~800 bytes in the
	 * query's memory at every call, which a LATERAL unpack of many segments would pile up.
	 */
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	reader = segment_payload(block, SEGMENT_KIND_AUDIT, &rows);
	payload_length = (uint32) (reader.end - reader.cursor);

	/* Walk the columns once to find where each starts and check every length. */
	stamps = reader;
	for (uint32 row = 0; row < rows; row++)
		take_varint(&reader);
	ids = reader;
	for (uint32 row = 0; row < rows; row++)
		take_varint(&reader);
	xid_bitmap = take_null_bitmap(&reader, rows, &xid_nulls);
	xids = reader;
	for (uint32 row = xid_nulls; row < rows; row++)
		take_varint(&reader);
	attr_bitmap = take_null_bitmap(&reader, rows, &attr_nulls);
	attr_lengths = reader;
	for (uint32 row = attr_nulls; row < rows; row++)
		attr_total += take_length(&reader, payload_length);
	content_lengths = reader;
	for (uint32 row = 0; row < rows; row++)
		content_total += take_length(&reader, payload_length);
	attr_text = take_bytes(&reader, attr_total);
	content_bytes = take_bytes(&reader, content_total);
	if (reader.cursor != reader.end)
		segment_corrupt("bytes after the last column");

	row_context = AllocSetContextCreate(CurrentMemoryContext, "shardlog_unpack_audit row",
										ALLOCSET_DEFAULT_SIZES);
	memset(nulls, 0, sizeof(nulls));
	for (uint32 row = 0; row < rows; row++)
	{
		uint64		content_length = take_varint(&content_lengths);

		ts += (uint64) take_zigzag(&stamps);
		if (!TIMESTAMP_NOT_FINITE((TimestampTz) ts) && !IS_VALID_TIMESTAMP((TimestampTz) ts))
			segment_corrupt("ts out of range");
		id += (uint64) take_zigzag(&ids);
		/*
		 * With bounds, a row outside [from_ts, to_ts) is stepped over without being built: its
		 * lengths only move the column cursors. (Compaction stores rows in (ts, id) order, but
		 * a block need not be: this does not depend on it.)
		 */
		if (bounded && ((TimestampTz) ts < from_ts || (TimestampTz) ts >= to_ts))
		{
			content_bytes += content_length;
			if (!is_null(attr_bitmap, row))
				attr_text += take_varint(&attr_lengths);
			if (!is_null(xid_bitmap, row))
				xid += (uint64) take_zigzag(&xids);
			continue;
		}
		outer = MemoryContextSwitchTo(row_context);
		values[0] = Int32GetDatum((int32) row + 1);
		values[1] = Int64GetDatum((int64) id);
		values[2] = TimestampTzGetDatum((TimestampTz) ts);
		values[3] = content_datum(content_bytes, content_length);
		content_bytes += content_length;
		nulls[4] = is_null(attr_bitmap, row);
		if (!nulls[4])
		{
			uint64		attr_length = take_varint(&attr_lengths);

			values[4] = attrs_datum(attr_text, attr_length);
			attr_text += attr_length;
		}
		nulls[5] = is_null(xid_bitmap, row);
		if (!nulls[5])
		{
			xid += (uint64) take_zigzag(&xids);
			values[5] = FullTransactionIdGetDatum(FullTransactionIdFromU64(xid));
		}
		MemoryContextSwitchTo(outer);
		tuplestore_putvalues(result->setResult, result->setDesc, values, nulls);
		MemoryContextReset(row_context);
	}
	MemoryContextDelete(row_context);
	return (Datum) 0;
}

Datum
shardlog_block_rows(PG_FUNCTION_ARGS)
{
	bytea	   *block = PG_GETARG_BYTEA_P_SLICE(0, 0, SEGMENT_HEADER_SIZE);

	PG_RETURN_INT32((int32) segment_header_rows(block));
}
