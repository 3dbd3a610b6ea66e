/*
 * shardlog_segments: the segment codec of compacted days (docs/architecture.md, "Compacted
 * days"). This file holds the block envelope and the primitives the column codecs share;
 * audit.c packs and unpacks audit rows, grams.c builds and probes the trigram filter.
 *
 * A block (the segment table's `block` column):
 *
 *   offset  size  field
 *   0       4     magic 'SLSG'
 *   4       1     format version (1)
 *   5       1     kind (1 = audit, 2 = flow)
 *   6       2     zero
 *   8       4     row count, u32 little-endian
 *   12      4     payload length (uncompressed), u32 little-endian, at most 1 GB
 *   16      ...   one zstd frame (with its content size and checksum) of the payload
 *
 * Every payload starts with the row count again (a varint), so that a changed count in the
 * header is caught. The audit payload then holds its columns one after another (n = row count; a varint is LEB128, a
 * zigzag varint a signed value mapped to unsigned first; deltas wrap modulo 2^64, so any
 * int64 round-trips, infinities of timestamptz included):
 *
 *   ts            n zigzag varints, each the delta from the previous row's ts (the first from 0)
 *   id            n zigzag varints, likewise
 *   created_xid   a null bitmap (ceil(n/8) bytes, bit set = NULL, row i at bit i % 8 of byte
 *                 i / 8), then one zigzag varint delta per non-NULL value from the previous
 *                 non-NULL value (the first from 0)
 *   attrs         a null bitmap, then one varint length per non-NULL value
 *   content       n varint lengths
 *   attrs text    the non-NULL attrs as jsonb text (jsonb_out), back to back
 *   content bytes the contents, back to back
 *
 * Decoding trusts nothing: the zstd checksum catches flipped bytes in the frame, and every
 * length is checked against the bytes that remain and the sizes the header declares, so a
 * corrupt block raises ERRCODE_DATA_CORRUPTED and never reads out of bounds.
 */
#include "postgres.h"

#include <zstd.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "segments.h"

PG_MODULE_MAGIC;

#define SEGMENT_MAGIC "SLSG"
#define SEGMENT_VERSION 1
#define SEGMENT_MAX_PAYLOAD (1024 * 1024 * 1024)

void
segment_corrupt(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("corrupt shardlog segment: %s", what)));
}

void
put_varint(StringInfo out, uint64 value)
{
	uint8		bytes[10];
	int			length = 0;

	while (value >= 0x80)
	{
		bytes[length++] = (uint8) (value | 0x80);
		value >>= 7;
	}
	bytes[length++] = (uint8) value;
	appendBinaryStringInfo(out, (const char *) bytes, length);
}

void
put_zigzag(StringInfo out, int64 value)
{
	put_varint(out, ((uint64) value << 1) ^ (uint64) (value >> 63));
}

uint64
take_varint(SegmentReader *reader)
{
	uint64		value = 0;
	int			shift = 0;

	for (;;)
	{
		uint8		byte;

		if (reader->cursor >= reader->end)
			segment_corrupt("varint past the end");
		if (shift > 63)
			segment_corrupt("varint too long");
		byte = *reader->cursor++;
		value |= (uint64) (byte & 0x7F) << shift;
		if ((byte & 0x80) == 0)
			return value;
		shift += 7;
	}
}

int64
take_zigzag(SegmentReader *reader)
{
	uint64		raw = take_varint(reader);

	return (int64) ((raw >> 1) ^ (~(raw & 1) + 1));
}

const uint8 *
take_bytes(SegmentReader *reader, uint64 length)
{
	const uint8 *start = reader->cursor;

	if (length > (uint64) (reader->end - reader->cursor))
		segment_corrupt("length past the end");
	reader->cursor += length;
	return start;
}

static void
put_u32(uint8 *at, uint32 value)
{
	at[0] = (uint8) value;
	at[1] = (uint8) (value >> 8);
	at[2] = (uint8) (value >> 16);
	at[3] = (uint8) (value >> 24);
}

static uint32
get_u32(const uint8 *at)
{
	return (uint32) at[0] | ((uint32) at[1] << 8) | ((uint32) at[2] << 16) | ((uint32) at[3] << 24);
}

/* The header and the payload compressed into one zstd frame, as a bytea. */
bytea *
segment_seal(uint8 kind, uint32 rows, StringInfo payload, int level)
{
	size_t		bound;
	size_t		written;
	bytea	   *block;
	uint8	   *header;
	ZSTD_CCtx  *context;

	if (level < 1 || level > ZSTD_maxCLevel())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("level must be between 1 and %d", ZSTD_maxCLevel())));
	if ((size_t) payload->len > SEGMENT_MAX_PAYLOAD)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a segment holds at most 1 GB of rows")));
	bound = ZSTD_compressBound(payload->len);
	if (bound + SEGMENT_HEADER_SIZE + VARHDRSZ > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a segment holds at most 1 GB of rows")));
	block = palloc(VARHDRSZ + SEGMENT_HEADER_SIZE + bound);
	header = (uint8 *) VARDATA(block);
	memcpy(header, SEGMENT_MAGIC, 4);
	header[4] = SEGMENT_VERSION;
	header[5] = kind;
	header[6] = 0;
	header[7] = 0;
	put_u32(header + 8, rows);
	put_u32(header + 12, (uint32) payload->len);

	context = ZSTD_createCCtx();
	if (context == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("zstd: out of memory")));
	ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, 1);
	written = ZSTD_compress2(context, header + SEGMENT_HEADER_SIZE, bound, payload->data, payload->len);
	ZSTD_freeCCtx(context);
	if (ZSTD_isError(written))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("zstd: %s", ZSTD_getErrorName(written))));
	SET_VARSIZE(block, VARHDRSZ + SEGMENT_HEADER_SIZE + written);
	return block;
}

static void
check_header(const uint8 *header, size_t size)
{
	if (size < SEGMENT_HEADER_SIZE)
		segment_corrupt("shorter than its header");
	if (memcmp(header, SEGMENT_MAGIC, 4) != 0)
		segment_corrupt("bad magic");
	if (header[4] != SEGMENT_VERSION)
		segment_corrupt("unknown format version");
	if (header[6] != 0 || header[7] != 0)
		segment_corrupt("bad header");
	if (get_u32(header + 8) > PG_INT32_MAX)
		segment_corrupt("too many rows");
}

/* The row count of a block (of any kind), from its header alone. */
uint32
segment_header_rows(bytea *block)
{
	const uint8 *header = (const uint8 *) VARDATA_ANY(block);

	check_header(header, VARSIZE_ANY_EXHDR(block));
	return get_u32(header + 8);
}

/*
 * The payload of a block of this kind, decompressed and checked against its header; the row
 * count and payload length through the pointers.
 */
uint8 *
segment_open(bytea *block, uint8 kind, uint32 *rows, uint32 *payload_length)
{
	const uint8 *header = (const uint8 *) VARDATA_ANY(block);
	size_t		size = VARSIZE_ANY_EXHDR(block);
	size_t		frame_size;
	unsigned long long content_size;
	uint8	   *payload;
	size_t		decompressed;

	check_header(header, size);
	if (header[5] != kind)
		segment_corrupt("not a block of this kind");
	*rows = get_u32(header + 8);
	*payload_length = get_u32(header + 12);
	if (*payload_length > SEGMENT_MAX_PAYLOAD)
		segment_corrupt("payload larger than 1 GB");
	/* Every row takes at least three bytes (its ts, its id and its content's length). */
	if ((uint64) *rows * 3 > *payload_length)
		segment_corrupt("more rows than the payload can hold");

	frame_size = ZSTD_findFrameCompressedSize(header + SEGMENT_HEADER_SIZE, size - SEGMENT_HEADER_SIZE);
	if (ZSTD_isError(frame_size) || frame_size != size - SEGMENT_HEADER_SIZE)
		segment_corrupt("bad zstd frame");
	content_size = ZSTD_getFrameContentSize(header + SEGMENT_HEADER_SIZE, frame_size);
	if (content_size != *payload_length)
		segment_corrupt("payload length differs from the frame's");

	payload = MemoryContextAllocHuge(CurrentMemoryContext, (Size) *payload_length + 1);
	decompressed = ZSTD_decompress(payload, *payload_length + 1,
								   header + SEGMENT_HEADER_SIZE, frame_size);
	if (ZSTD_isError(decompressed) || decompressed != *payload_length)
		segment_corrupt("zstd frame does not decompress");
	return payload;
}

/* A reader over a block's payload, past the row count it repeats (checked against the header). */
SegmentReader
segment_payload(bytea *block, uint8 kind, uint32 *rows)
{
	uint32		payload_length;
	SegmentReader reader;

	reader.cursor = segment_open(block, kind, rows, &payload_length);
	reader.end = reader.cursor + payload_length;
	if (take_varint(&reader) != *rows)
		segment_corrupt("row count differs from the header's");
	return reader;
}

/* The elements of a one-dimensional array argument (an error naming the argument otherwise). */
Datum *
array_elements(ArrayType *array, Oid element_type, const char *argument, bool **nulls, int *count)
{
	int16		length;
	bool		by_value;
	char		align;
	Datum	   *elements;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", argument)));
	if (ARR_ELEMTYPE(array) != element_type)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s has the wrong element type", argument)));
	get_typlenbyvalalign(element_type, &length, &by_value, &align);
	deconstruct_array(array, element_type, length, by_value, align, &elements, nulls, count);
	return elements;
}
