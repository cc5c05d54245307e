import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DatasetSource } from './dataset-source.ts';
import { readTableRows, scanDocument } from './dataset-source.ts';
import { Base64Value, LongValueSizes, SHORT_STRING_BYTES } from './dataset-strings.ts';

/** A source that hands `bytes` in chunks cut at `cuts` (absolute offsets), whatever range is read. */
function cutSource(bytes: Buffer, cuts: readonly number[]): DatasetSource {
  return {
    sizeBytes: bytes.length,
    async *read(start, end) {
      let at = start;
      for (const cut of [...cuts, end].filter((c) => c > start && c <= end).sort((a, b) => a - b)) {
        if (cut > at) yield bytes.subarray(at, cut);
        at = cut;
      }
    },
  };
}

/** Bytes that differ at every position (so a shifted or dropped group shows). */
function patternBytes(length: number): Buffer {
  const bytes = Buffer.alloc(length);
  for (let i = 0; i < length; i += 1) bytes[i] = (i * 131 + (i >> 8)) & 0xff;
  return bytes;
}

/** The rows of table `t` of `document`, read from `source` (with `sizes`, when given). */
async function readRows(source: DatasetSource, sizes?: LongValueSizes): Promise<Record<string, unknown>[]> {
  const outline = await scanDocument(source);
  const range = outline.tables.get('t');
  assert.ok(range !== undefined && range !== 'not an array');
  const rows: Record<string, unknown>[] = [];
  for await (const { value } of readTableRows(source, range, sizes))
    rows.push(value as Record<string, unknown>);
  return rows;
}

function documentOf(rows: unknown[]): Buffer {
  // A long string before the table: the outline must still find the table's range.
  return Buffer.from(
    JSON.stringify({ format: 'x', tables: { before: [{ v: 'QUJD'.repeat(40_000) }], t: rows } }),
  );
}

describe('dataset strings: long base64 values decoded as they are read', () => {
  it('decodes a value split across read chunks at every offset mod 4, around the buffer edge, with each padding', async () => {
    // Three lengths: no padding, `==`, `=`.
    for (const length of [150_000, 150_001, 150_002]) {
      const bytes = patternBytes(length);
      const text = bytes.toString('base64');
      const document = documentOf([{ a: text, b: 1 }]);
      const start = document.indexOf(text);
      const offsets = [
        ...Array.from({ length: 8 }, (_, i) => i + 1),
        ...Array.from({ length: 9 }, (_, i) => SHORT_STRING_BYTES - 4 + i),
        ...Array.from({ length: 8 }, (_, i) => text.length - 7 + i),
      ];
      for (const offset of offsets) {
        const [row] = await readRows(cutSource(document, [start + offset, start + offset + 3]));
        const value = row!.a;
        assert.ok(value instanceof Base64Value, `length ${length}, cut at ${offset}`);
        assert.equal(value.byteLength, length);
        assert.ok(value.toBuffer().equals(bytes), `length ${length}, cut at ${offset}`);
        assert.equal(value.toBase64(), text);
        assert.equal(row!.b, 1);
      }
    }
  });

  it('decodes a second reading of a range into a Buffer of each value its size, the same bytes', async () => {
    const values = [patternBytes(100_000), patternBytes(300_001), patternBytes(70_000)];
    const document = documentOf(
      values.map((v) => ({ a: v.toString('base64'), text: 'not base64 \n'.repeat(9000) })),
    );
    const sizes = new LongValueSizes();
    for (const reading of ['first', 'second'] as const) {
      const rows = await readRows(cutSource(document, [1001, 65_537, 200_003]), sizes);
      assert.equal(rows.length, values.length);
      rows.forEach((row, i) => {
        const value = row.a as Base64Value;
        assert.ok(value.toBuffer().equals(values[i]!), `${reading} reading, row ${i}`);
        assert.equal(row.text, 'not base64 \n'.repeat(9000));
      });
    }
  });

  it('gives back a long string that is not strict base64 as the same text', async () => {
    const text = patternBytes(120_000).toString('base64');
    const strings = [
      `${text.slice(0, 90_000)}\n${text.slice(90_000)}`, // a newline in the middle
      `${text.slice(0, 90_000)}=${text.slice(90_001)}`, // padding in the middle
      `${text.slice(0, 90_000)}!${text.slice(90_001)}`, // not a base64 character
      text.slice(0, -1), // length not a multiple of four
      `${text}AQ==`, // a canonical padded end (the control case: decoded)
      `${text}AB=`, // bad end
      `${text}AF==`, // trailing bits set
      `${text.slice(0, 100_000)}é€😀${text.slice(100_000)}`, // UTF-8, split across chunks below
      `${text.slice(0, 100_000)}\ud800${text.slice(100_000)}`, // a lone surrogate (\u escape)
      `x${'y'.repeat(80_000)}`, // text of base64 letters only, long: decoded, yet the same text
    ];
    const document = documentOf(strings.map((s) => ({ s })));
    const cuts = Array.from({ length: 200 }, (_, i) => 7 + i * 9_973);
    const rows = await readRows(cutSource(document, cuts));
    rows.forEach((row, i) => {
      const value = row.s;
      const asText = value instanceof Base64Value ? value.toBase64() : value;
      assert.equal(asText, strings[i], `string ${i}`);
    });
    assert.ok(rows[4]!.s instanceof Base64Value);
    for (const i of [0, 1, 2, 3, 5, 6, 7, 8]) assert.equal(typeof rows[i]!.s, 'string', `string ${i}`);
  });

  it('reads an escaped slash as part of a base64 value (as PHP writes it)', async () => {
    const bytes = patternBytes(90_000);
    const text = bytes.toString('base64');
    const document = Buffer.from(
      JSON.stringify({ format: 'x', tables: { t: [{ a: text }] } }).replaceAll('/', '\\/'),
    );
    const [row] = await readRows(cutSource(document, [5000, 70_001]));
    assert.ok(row!.a instanceof Base64Value);
    assert.ok(row!.a.toBuffer().equals(bytes));
  });
});
