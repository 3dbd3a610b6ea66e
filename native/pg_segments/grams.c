/*
 * grams.c: the trigram filter of a segment (the segment table's `grams` column), a Bloom
 * filter of the trigrams of the segment's contents with A-Z folded to a-z (other bytes as they
 * are), so that a substring, or a case-insensitive literal, absent from the filter is absent
 * from every row of the segment.
 *
 *   offset  size  field
 *   0       1     format version (1)
 *   1       1     k, the hash functions per trigram (3)
 *   2       2     zero
 *   4       4     bits, u32 little-endian: max(64, bits_per_gram x distinct trigrams),
 *                 rounded up to a multiple of 8
 *   8       bits / 8  the filter; trigram t sets bits (a + i b) mod bits, i < k, where a and b
 *                 are the low and high halves (b made odd) of one 64-bit hash of t's 3 bytes
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "segments.h"

PG_FUNCTION_INFO_V1(shardlog_grams);
PG_FUNCTION_INFO_V1(shardlog_may_contain);

#define GRAMS_VERSION 1
#define GRAMS_HASHES 3
#define GRAMS_HEADER_SIZE 8
#define GRAMS_MIN_BITS 64
#define TRIGRAM_SPACE (1 << 24)

static inline uint8
fold(uint8 byte)
{
	return (byte >= 'A' && byte <= 'Z') ? (uint8) (byte + ('a' - 'A')) : byte;
}

static inline uint32
trigram_at(const uint8 *bytes)
{
	return ((uint32) fold(bytes[0]) << 16) | ((uint32) fold(bytes[1]) << 8) | fold(bytes[2]);
}

/* splitmix64's finaliser: one well-mixed 64-bit hash of a trigram. */
static inline uint64
trigram_hash(uint32 trigram)
{
	uint64		h = (uint64) trigram + UINT64CONST(0x9E3779B97F4A7C15);

	h = (h ^ (h >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	h = (h ^ (h >> 27)) * UINT64CONST(0x94D049BB133111EB);
	return h ^ (h >> 31);
}

static inline uint64
probe(uint64 hash, int i, uint32 bits)
{
	uint64		a = hash & 0xFFFFFFFF;
	uint64		b = (hash >> 32) | 1;

	return (a + (uint64) i * b) % bits;
}

Datum
shardlog_grams(PG_FUNCTION_ARGS)
{
	int			rows;
	bool	   *nulls;
	Datum	   *contents = array_elements(PG_GETARG_ARRAYTYPE_P(0), TEXTOID, "contents", &nulls, &rows);
	int32		bits_per_gram = PG_GETARG_INT32(1);
	uint8	   *seen;
	uint32	   *distinct;
	uint32		distinct_count = 0;
	uint32		distinct_capacity = 1024;
	uint64		bits;
	bytea	   *grams;
	uint8	   *header;
	uint8	   *filter;

	if (bits_per_gram < 1 || bits_per_gram > 64)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bits_per_gram must be between 1 and 64")));
	/* Exact distinct trigrams: one bit for each of the 2^24 possible ones. */
	seen = palloc0(TRIGRAM_SPACE / 8);
	distinct = palloc(distinct_capacity * sizeof(uint32));
	for (int row = 0; row < rows; row++)
	{
		struct varlena *content;
		const uint8 *bytes;
		size_t		length;

		if (nulls[row])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("contents[%d] is NULL", row + 1)));
		content = (struct varlena *) DatumGetPointer(contents[row]);
		bytes = (const uint8 *) VARDATA_ANY(content);
		length = VARSIZE_ANY_EXHDR(content);
		for (size_t at = 0; at + 3 <= length; at++)
		{
			uint32		trigram = trigram_at(bytes + at);

			if (seen[trigram / 8] & (1 << (trigram % 8)))
				continue;
			seen[trigram / 8] |= (uint8) (1 << (trigram % 8));
			if (distinct_count == distinct_capacity)
			{
				distinct_capacity *= 2;
				distinct = repalloc(distinct, distinct_capacity * sizeof(uint32));
			}
			distinct[distinct_count++] = trigram;
		}
	}
	pfree(seen);

	bits = Max((uint64) GRAMS_MIN_BITS, (uint64) bits_per_gram * distinct_count);
	bits = (bits + 7) / 8 * 8;
	grams = palloc0(VARHDRSZ + GRAMS_HEADER_SIZE + bits / 8);
	SET_VARSIZE(grams, VARHDRSZ + GRAMS_HEADER_SIZE + bits / 8);
	header = (uint8 *) VARDATA(grams);
	header[0] = GRAMS_VERSION;
	header[1] = GRAMS_HASHES;
	header[4] = (uint8) bits;
	header[5] = (uint8) (bits >> 8);
	header[6] = (uint8) (bits >> 16);
	header[7] = (uint8) (bits >> 24);
	filter = header + GRAMS_HEADER_SIZE;
	for (uint32 i = 0; i < distinct_count; i++)
	{
		uint64		hash = trigram_hash(distinct[i]);

		for (int h = 0; h < GRAMS_HASHES; h++)
		{
			uint64		bit = probe(hash, h, (uint32) bits);

			filter[bit / 8] |= (uint8) (1 << (bit % 8));
		}
	}
	pfree(distinct);
	PG_RETURN_BYTEA_P(grams);
}

Datum
shardlog_may_contain(PG_FUNCTION_ARGS)
{
	bytea	   *grams = PG_GETARG_BYTEA_PP(0);
	text	   *pattern = PG_GETARG_TEXT_PP(1);
	const uint8 *header = (const uint8 *) VARDATA_ANY(grams);
	size_t		size = VARSIZE_ANY_EXHDR(grams);
	const uint8 *bytes = (const uint8 *) VARDATA_ANY(pattern);
	size_t		length = VARSIZE_ANY_EXHDR(pattern);
	const uint8 *filter;
	uint32		bits;
	int			hashes;

	if (size < GRAMS_HEADER_SIZE || header[0] != GRAMS_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("corrupt shardlog trigram filter: bad header")));
	hashes = header[1];
	bits = (uint32) header[4] | ((uint32) header[5] << 8) | ((uint32) header[6] << 16) |
		((uint32) header[7] << 24);
	if (hashes < 1 || hashes > 16 || bits < GRAMS_MIN_BITS || bits % 8 != 0 ||
		size - GRAMS_HEADER_SIZE != bits / 8)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("corrupt shardlog trigram filter: bad size")));
	filter = header + GRAMS_HEADER_SIZE;
	for (size_t at = 0; at + 3 <= length; at++)
	{
		uint64		hash = trigram_hash(trigram_at(bytes + at));

		for (int h = 0; h < hashes; h++)
		{
			uint64		bit = probe(hash, h, bits);

			if ((filter[bit / 8] & (1 << (bit % 8))) == 0)
				PG_RETURN_BOOL(false);
		}
	}
	PG_RETURN_BOOL(true);
}
