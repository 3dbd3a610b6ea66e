/*
 * columns.c: what the column codecs of every kind share: argument checks, null bitmaps and
 * integer columns (plain or delta-coded zigzag varints, with or without a null bitmap).
 */
#include "postgres.h"

#include "segments.h"

void
require_length(int count, int rows, const char *argument)
{
	if (count != rows)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s has %d elements, ids has %d", argument, count, rows)));
}

void
require_no_nulls(const bool *nulls, int rows, const char *argument)
{
	for (int row = 0; row < rows; row++)
		if (nulls[row])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s[%d] is NULL", argument, row + 1)));
}

void
put_null_bitmap(StringInfo out, const bool *nulls, int rows)
{
	for (int start = 0; start < rows; start += 8)
	{
		uint8		byte = 0;

		for (int bit = 0; bit < 8 && start + bit < rows; bit++)
			if (nulls[start + bit])
				byte |= (uint8) (1 << bit);
		appendStringInfoChar(out, (char) byte);
	}
}

/* A null bitmap of `rows` bits; the count of NULLs through the pointer. */
const uint8 *
take_null_bitmap(SegmentReader *reader, uint32 rows, uint32 *null_count)
{
	const uint8 *bitmap = take_bytes(reader, ((uint64) rows + 7) / 8);

	*null_count = 0;
	for (uint32 row = 0; row < rows; row++)
		if (bitmap[row / 8] & (1 << (row % 8)))
			(*null_count)++;
	if (rows % 8 != 0 && (bitmap[rows / 8] >> (rows % 8)) != 0)
		segment_corrupt("bits past the last row");
	return bitmap;
}

bool
is_null(const uint8 *bitmap, uint32 row)
{
	return (bitmap[row / 8] & (1 << (row % 8))) != 0;
}

void
put_int64_column(StringInfo out, const int64 *values, const bool *nulls, int rows, bool delta)
{
	uint64		previous = 0;

	if (nulls != NULL)
		put_null_bitmap(out, nulls, rows);
	for (int row = 0; row < rows; row++)
	{
		if (nulls != NULL && nulls[row])
			continue;
		put_zigzag(out, delta ? (int64) ((uint64) values[row] - previous) : values[row]);
		previous = (uint64) values[row];
	}
}

/*
 * A column written by put_int64_column, opened for reading one row at a time: its bitmap and
 * values are checked against the bytes that remain, and the reader moves past them.
 */
void
open_int64_column(SegmentReader *reader, uint32 rows, bool nullable, bool delta,
				  Int64Column *column)
{
	uint32		null_count = 0;

	column->nulls = nullable ? take_null_bitmap(reader, rows, &null_count) : NULL;
	column->values = *reader;
	column->delta = delta;
	column->previous = 0;
	for (uint32 row = null_count; row < rows; row++)
		take_varint(reader);
	column->values.end = reader->cursor;
}

/* The value of the next row (rows in order), or false where it is NULL. */
bool
next_int64(Int64Column *column, uint32 row, int64 *value)
{
	int64		raw;

	if (column->nulls != NULL && is_null(column->nulls, row))
		return false;
	raw = take_zigzag(&column->values);
	if (column->delta)
		raw = (int64) (column->previous + (uint64) raw);
	column->previous = (uint64) raw;
	*value = raw;
	return true;
}
