/*
 * flow.c: flow rows (the columns of a flow day table, router/db/ddl.py) packed into a block
 * and unpacked from one. After the row count, the flow payload holds, one column after another
 * (n = row count; "plain" = a zigzag varint per value, "delta" = a zigzag varint delta from the
 * previous value of the column, "nullable" = a null bitmap first, values of non-NULL rows only):
 *
 *   id                       delta
 *   first_seen               delta
 *   last_seen                plain, each minus its row's first_seen
 *   src_ip, dst_ip           each: a family bitmap (bit set = IPv6), n netmask lengths (a byte
 *                            each), then the addresses, 4 or 16 bytes each
 *   src_port, dst_port, ip_version   plain
 *   proto                    nullable plain
 *   bytes, packets, flow_count       plain
 *   created_xid, merged_xid  nullable delta
 *   tcp_flags, sampling_rate nullable plain
 *   sampled, sampling_mixed  a bitmap each (bit set = true)
 */
#include "postgres.h"

#include <sys/socket.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/inet.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/xid8.h"

#include "segments.h"

PG_FUNCTION_INFO_V1(shardlog_pack_flow);
PG_FUNCTION_INFO_V1(shardlog_unpack_flow);

/* The integer columns, in the order of the SQL arguments after the two addresses. */
typedef struct FlowInteger
{
	const char *name;
	Oid			type;
	bool		nullable;
	bool		delta;
	int64		low;
	int64		high;
} FlowInteger;

/* Argument positions of shardlog_pack_flow (and, plus one for ord, result columns). */
enum
{
	FLOW_ID,
	FLOW_SRC_IP,
	FLOW_DST_IP,
	FLOW_SRC_PORT,
	FLOW_DST_PORT,
	FLOW_IP_VERSION,
	FLOW_PROTO,
	FLOW_BYTES,
	FLOW_PACKETS,
	FLOW_FLOW_COUNT,
	FLOW_FIRST_SEEN,
	FLOW_LAST_SEEN,
	FLOW_CREATED_XID,
	FLOW_MERGED_XID,
	FLOW_TCP_FLAGS,
	FLOW_SAMPLING_RATE,
	FLOW_SAMPLED,
	FLOW_SAMPLING_MIXED,
	FLOW_ARGUMENTS
};

static const FlowInteger flow_integers[FLOW_ARGUMENTS] = {
	[FLOW_ID] = {"ids", INT8OID, false, true, PG_INT64_MIN, PG_INT64_MAX},
	[FLOW_SRC_PORT] = {"src_ports", INT4OID, false, false, PG_INT32_MIN, PG_INT32_MAX},
	[FLOW_DST_PORT] = {"dst_ports", INT4OID, false, false, PG_INT32_MIN, PG_INT32_MAX},
	[FLOW_IP_VERSION] = {"ip_versions", INT2OID, false, false, PG_INT16_MIN, PG_INT16_MAX},
	[FLOW_PROTO] = {"protos", INT2OID, true, false, PG_INT16_MIN, PG_INT16_MAX},
	[FLOW_BYTES] = {"bytes", INT8OID, false, false, PG_INT64_MIN, PG_INT64_MAX},
	[FLOW_PACKETS] = {"packets", INT8OID, false, false, PG_INT64_MIN, PG_INT64_MAX},
	[FLOW_FLOW_COUNT] = {"flow_counts", INT8OID, false, false, PG_INT64_MIN, PG_INT64_MAX},
	[FLOW_FIRST_SEEN] = {"first_seen", TIMESTAMPTZOID, false, true, PG_INT64_MIN, PG_INT64_MAX},
	[FLOW_LAST_SEEN] = {"last_seen", TIMESTAMPTZOID, false, false, PG_INT64_MIN, PG_INT64_MAX},
	[FLOW_CREATED_XID] = {"created_xids", XID8OID, true, true, PG_INT64_MIN, PG_INT64_MAX},
	[FLOW_MERGED_XID] = {"merged_xids", XID8OID, true, true, PG_INT64_MIN, PG_INT64_MAX},
	[FLOW_TCP_FLAGS] = {"tcp_flags", INT2OID, true, false, PG_INT16_MIN, PG_INT16_MAX},
	[FLOW_SAMPLING_RATE] = {"sampling_rates", INT4OID, true, false, PG_INT32_MIN, PG_INT32_MAX},
	[FLOW_SAMPLED] = {"sampled", BOOLOID, false, false, 0, 1},
	[FLOW_SAMPLING_MIXED] = {"sampling_mixed", BOOLOID, false, false, 0, 1},
};

/* The order the integer columns take in the payload (after id and the two addresses). */
static const int flow_payload_order[] = {
	FLOW_SRC_PORT, FLOW_DST_PORT, FLOW_IP_VERSION, FLOW_PROTO, FLOW_BYTES, FLOW_PACKETS,
	FLOW_FLOW_COUNT, FLOW_CREATED_XID, FLOW_MERGED_XID, FLOW_TCP_FLAGS, FLOW_SAMPLING_RATE,
};

static int64
datum_int64(Datum value, Oid type)
{
	switch (type)
	{
		case INT2OID:
			return DatumGetInt16(value);
		case INT4OID:
			return DatumGetInt32(value);
		case BOOLOID:
			return DatumGetBool(value) ? 1 : 0;
		default:
			return DatumGetInt64(value);
	}
}

static Datum
int64_datum(int64 value, Oid type)
{
	switch (type)
	{
		case INT2OID:
			return Int16GetDatum((int16) value);
		case INT4OID:
			return Int32GetDatum((int32) value);
		case BOOLOID:
			return BoolGetDatum(value != 0);
		case XID8OID:
			return FullTransactionIdGetDatum(FullTransactionIdFromU64((uint64) value));
		default:
			return Int64GetDatum(value);
	}
}

static void
put_addresses(StringInfo out, Datum *addresses, int rows)
{
	bool	   *v6 = palloc(sizeof(bool) * Max(rows, 1));

	for (int row = 0; row < rows; row++)
		v6[row] = ip_family(DatumGetInetPP(addresses[row])) == PGSQL_AF_INET6;
	put_null_bitmap(out, v6, rows);
	for (int row = 0; row < rows; row++)
		appendStringInfoChar(out, (char) ip_bits(DatumGetInetPP(addresses[row])));
	for (int row = 0; row < rows; row++)
		appendBinaryStringInfo(out, (const char *) ip_addr(DatumGetInetPP(addresses[row])),
							   v6[row] ? 16 : 4);
	pfree(v6);
}

/* An address column, opened for reading one row at a time. */
typedef struct AddressColumn
{
	const uint8 *v6;
	const uint8 *bits;
	SegmentReader bytes;
} AddressColumn;

static void
open_addresses(SegmentReader *reader, uint32 rows, AddressColumn *column)
{
	uint32		v6_count;

	column->v6 = take_null_bitmap(reader, rows, &v6_count);
	column->bits = take_bytes(reader, rows);
	column->bytes.cursor = take_bytes(reader, (uint64) v6_count * 16 + (uint64) (rows - v6_count) * 4);
	column->bytes.end = reader->cursor;
}

static Datum
next_address(AddressColumn *column, uint32 row)
{
	inet	   *address = palloc0(sizeof(inet));
	bool		is_v6 = is_null(column->v6, row);
	int			length = is_v6 ? 16 : 4;

	if (column->bits[row] > length * 8)
		segment_corrupt("netmask longer than its address");
	ip_family(address) = is_v6 ? PGSQL_AF_INET6 : PGSQL_AF_INET;
	ip_bits(address) = column->bits[row];
	memcpy(ip_addr(address), take_bytes(&column->bytes, length), length);
	SET_INET_VARSIZE(address);
	return InetPGetDatum(address);
}

static void
check_instant(int64 value)
{
	if (!TIMESTAMP_NOT_FINITE(value) && !IS_VALID_TIMESTAMP(value))
		segment_corrupt("first_seen or last_seen out of range");
}

Datum
shardlog_pack_flow(PG_FUNCTION_ARGS)
{
	int			rows;
	int			count;
	bool	   *nulls;
	Datum	   *elements[FLOW_ARGUMENTS];
	int64	   *integers[FLOW_ARGUMENTS];
	bool	   *integer_nulls[FLOW_ARGUMENTS];
	int			level = PG_GETARG_INT32(FLOW_ARGUMENTS);
	StringInfoData payload;

	elements[FLOW_ID] = array_elements(PG_GETARG_ARRAYTYPE_P(FLOW_ID), INT8OID, "ids", &nulls, &rows);
	require_no_nulls(nulls, rows, "ids");
	for (int argument = FLOW_SRC_IP; argument <= FLOW_DST_IP; argument++)
	{
		const char *name = argument == FLOW_SRC_IP ? "src_ips" : "dst_ips";

		elements[argument] = array_elements(PG_GETARG_ARRAYTYPE_P(argument), INETOID, name,
											&nulls, &count);
		require_length(count, rows, name);
		require_no_nulls(nulls, rows, name);
	}
	for (int argument = 0; argument < FLOW_ARGUMENTS; argument++)
	{
		const FlowInteger *column = &flow_integers[argument];

		if (argument == FLOW_SRC_IP || argument == FLOW_DST_IP)
			continue;
		elements[argument] = array_elements(PG_GETARG_ARRAYTYPE_P(argument), column->type,
											column->name, &integer_nulls[argument], &count);
		require_length(count, rows, column->name);
		if (!column->nullable)
			require_no_nulls(integer_nulls[argument], rows, column->name);
		integers[argument] = palloc(sizeof(int64) * Max(rows, 1));
		for (int row = 0; row < rows; row++)
			integers[argument][row] = integer_nulls[argument][row]
				? 0 : datum_int64(elements[argument][row], column->type);
	}
	for (int row = 0; row < rows; row++)
		integers[FLOW_LAST_SEEN][row] = (int64) ((uint64) integers[FLOW_LAST_SEEN][row] -
												 (uint64) integers[FLOW_FIRST_SEEN][row]);

	initStringInfo(&payload);
	put_varint(&payload, (uint64) rows);
	put_int64_column(&payload, integers[FLOW_ID], NULL, rows, true);
	put_int64_column(&payload, integers[FLOW_FIRST_SEEN], NULL, rows, true);
	put_int64_column(&payload, integers[FLOW_LAST_SEEN], NULL, rows, false);
	put_addresses(&payload, elements[FLOW_SRC_IP], rows);
	put_addresses(&payload, elements[FLOW_DST_IP], rows);
	for (size_t at = 0; at < lengthof(flow_payload_order); at++)
	{
		int			argument = flow_payload_order[at];
		const FlowInteger *column = &flow_integers[argument];

		put_int64_column(&payload, integers[argument],
						 column->nullable ? integer_nulls[argument] : NULL, rows, column->delta);
	}
	/* The booleans as bitmaps: a "null" bit stands for true. */
	{
		bool	   *sampled = palloc(sizeof(bool) * Max(rows, 1));
		bool	   *mixed = palloc(sizeof(bool) * Max(rows, 1));

		for (int row = 0; row < rows; row++)
		{
			sampled[row] = integers[FLOW_SAMPLED][row] != 0;
			mixed[row] = integers[FLOW_SAMPLING_MIXED][row] != 0;
		}
		put_null_bitmap(&payload, sampled, rows);
		put_null_bitmap(&payload, mixed, rows);
	}
	PG_RETURN_BYTEA_P(segment_seal(SEGMENT_KIND_FLOW, (uint32) rows, &payload, level));
}

/*
 * Decoded row by row, as audit blocks are: the memory it takes is one row's, whatever the row
 * count a block claims (rows go to the tuplestore, which spills to disk past work_mem).
 */
Datum
shardlog_unpack_flow(PG_FUNCTION_ARGS)
{
	bytea	   *block = PG_GETARG_BYTEA_PP(0);
	ReturnSetInfo *result = (ReturnSetInfo *) fcinfo->resultinfo;
	uint32		rows,
				ignored;
	SegmentReader reader;
	Int64Column integers[FLOW_ARGUMENTS];
	AddressColumn addresses[2];
	const uint8 *sampled,
			   *mixed;
	MemoryContext row_context,
				outer;
	Datum		values[FLOW_ARGUMENTS + 1];
	bool		value_nulls[FLOW_ARGUMENTS + 1];

	/*
	 * The executor's own row type, not get_call_result_type(): that one leaves ~800 bytes in the
	 * query's memory at every call, which a LATERAL unpack of many segments would pile up.
	 */
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	reader = segment_payload(block, SEGMENT_KIND_FLOW, &rows);

	/* Walk the columns once to find where each starts and check every length. */
	open_int64_column(&reader, rows, false, true, &integers[FLOW_ID]);
	open_int64_column(&reader, rows, false, true, &integers[FLOW_FIRST_SEEN]);
	open_int64_column(&reader, rows, false, false, &integers[FLOW_LAST_SEEN]);
	open_addresses(&reader, rows, &addresses[0]);
	open_addresses(&reader, rows, &addresses[1]);
	for (size_t at = 0; at < lengthof(flow_payload_order); at++)
	{
		int			argument = flow_payload_order[at];
		const FlowInteger *column = &flow_integers[argument];

		open_int64_column(&reader, rows, column->nullable, column->delta, &integers[argument]);
	}
	sampled = take_null_bitmap(&reader, rows, &ignored);
	mixed = take_null_bitmap(&reader, rows, &ignored);
	if (reader.cursor != reader.end)
		segment_corrupt("bytes after the last column");

	row_context = AllocSetContextCreate(CurrentMemoryContext, "shardlog_unpack_flow row",
										ALLOCSET_SMALL_SIZES);
	for (uint32 row = 0; row < rows; row++)
	{
		int64		first_seen = 0;

		outer = MemoryContextSwitchTo(row_context);
		values[0] = Int32GetDatum((int32) row + 1);
		value_nulls[0] = false;
		for (int argument = 0; argument < FLOW_ARGUMENTS; argument++)
		{
			const FlowInteger *column = &flow_integers[argument];
			int64		value;

			value_nulls[argument + 1] = false;
			if (argument == FLOW_SRC_IP || argument == FLOW_DST_IP)
				values[argument + 1] = next_address(&addresses[argument - FLOW_SRC_IP], row);
			else if (argument == FLOW_SAMPLED || argument == FLOW_SAMPLING_MIXED)
				values[argument + 1] = BoolGetDatum(is_null(argument == FLOW_SAMPLED ? sampled : mixed, row));
			else if (!next_int64(&integers[argument], row, &value))
				value_nulls[argument + 1] = true;
			else
			{
				if (argument == FLOW_FIRST_SEEN)
					first_seen = value;
				if (argument == FLOW_LAST_SEEN)
					value = (int64) ((uint64) value + (uint64) first_seen);
				if (column->type == TIMESTAMPTZOID)
					check_instant(value);
				else if (value < column->low || value > column->high)
					segment_corrupt(psprintf("%s out of range", column->name));
				values[argument + 1] = int64_datum(value, column->type);
			}
		}
		MemoryContextSwitchTo(outer);
		tuplestore_putvalues(result->setResult, result->setDesc, values, value_nulls);
		MemoryContextReset(row_context);
	}
	MemoryContextDelete(row_context);
	return (Datum) 0;
}
