/*
 * segments.h: what the block codec (shardlog_segments.c), the audit columns (audit.c) and the
 * trigram filter (grams.c) share. The block format is described at the top of shardlog_segments.c.
 */
#ifndef SHARDLOG_SEGMENTS_H
#define SHARDLOG_SEGMENTS_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/array.h"

#define SEGMENT_KIND_AUDIT 1
#define SEGMENT_KIND_FLOW 2
#define SEGMENT_HEADER_SIZE 16

/* A decoder's view of bytes it must not read past. */
typedef struct SegmentReader
{
	const uint8 *cursor;
	const uint8 *end;
} SegmentReader;

/* An integer column read one row at a time (columns.c). */
typedef struct Int64Column
{
	SegmentReader values;
	const uint8 *nulls;			/* the null bitmap, NULL for a column without one */
	bool		delta;
	uint64		previous;
} Int64Column;

extern void segment_corrupt(const char *what) pg_attribute_noreturn();

extern void put_varint(StringInfo out, uint64 value);
extern void put_zigzag(StringInfo out, int64 value);
extern uint64 take_varint(SegmentReader *reader);
extern int64 take_zigzag(SegmentReader *reader);
extern const uint8 *take_bytes(SegmentReader *reader, uint64 length);

extern bytea *segment_seal(uint8 kind, uint32 rows, StringInfo payload, int level);
extern uint32 segment_header_rows(bytea *block);
extern uint8 *segment_open(bytea *block, uint8 kind, uint32 *rows, uint32 *payload_length);
extern SegmentReader segment_payload(bytea *block, uint8 kind, uint32 *rows);

extern void require_length(int count, int rows, const char *argument);
extern void require_no_nulls(const bool *nulls, int rows, const char *argument);
extern void put_null_bitmap(StringInfo out, const bool *nulls, int rows);
extern const uint8 *take_null_bitmap(SegmentReader *reader, uint32 rows, uint32 *null_count);
extern bool is_null(const uint8 *bitmap, uint32 row);
extern void put_int64_column(StringInfo out, const int64 *values, const bool *nulls, int rows,
							 bool delta);
extern void open_int64_column(SegmentReader *reader, uint32 rows, bool nullable, bool delta,
							  Int64Column *column);
extern bool next_int64(Int64Column *column, uint32 row, int64 *value);

extern Datum *array_elements(ArrayType *array, Oid element_type, const char *argument,
							 bool **nulls, int *count);

#endif
