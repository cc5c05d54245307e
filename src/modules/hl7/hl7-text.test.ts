/** The HL7 text rules the listener applies itself: escape sequences, MSH-18 decoding, HL7 dates. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Hl7Message } from '@medplum/core';
import { readHl7Date } from './adt-mapping.ts';
import { buildAck, charsetOf, decodeAs, escapeText, unescapeText } from './hl7-text.ts';

const separators = Hl7Message.parse('MSH|^~\\&|A').context;

describe('unescapeText / escapeText', () => {
  it('replaces the separator escapes, hex bytes and formatting sequences', () => {
    assert.equal(unescapeText('Smith\\T\\Sons \\F\\ A\\S\\B\\R\\C\\E\\', separators), 'Smith&Sons | A^B~C\\');
    assert.equal(unescapeText('Zo\\XEB\\', separators), 'Zoë');
    assert.equal(unescapeText('line\\.br\\two\\H\\', separators), 'linetwo');
    assert.equal(unescapeText('unterminated \\F', separators), 'unterminated \\F');
  });

  it('escapes what it unescapes, and drops control characters', () => {
    const text = 'a|b^c~d&e\\f\rg';
    assert.equal(escapeText(text, separators), 'a\\F\\b\\S\\c\\R\\d\\T\\e\\E\\f g');
    assert.equal(unescapeText(escapeText('a|b^c~d&e\\f', separators), separators), 'a|b^c~d&e\\f');
  });
});

describe('charsetOf / decodeAs', () => {
  it('reads ASCII, 8859/1 (also for an empty MSH-18) and UNICODE UTF-8, nothing else', () => {
    assert.equal(charsetOf('ASCII'), 'ascii');
    assert.equal(charsetOf(''), 'latin1');
    assert.equal(charsetOf('8859/1'), 'latin1');
    assert.equal(charsetOf('UNICODE UTF-8'), 'utf-8');
    assert.equal(charsetOf('8859/2'), undefined);
    assert.equal(charsetOf('UNICODE'), undefined);
  });

  it('refuses bytes that are not of the declared set', () => {
    const utf8Bytes = Buffer.from('Zoë', 'utf8').toString('latin1');
    assert.equal(decodeAs(utf8Bytes, 'utf-8'), 'Zoë');
    assert.equal(decodeAs('Zo\u00eb', 'utf-8'), undefined, 'a lone Latin-1 byte is not UTF-8');
    assert.equal(decodeAs('Zo\u00eb', 'ascii'), undefined);
    assert.equal(decodeAs('Zo\u00eb', 'latin1'), 'Zoë');
  });
});

describe('readHl7Date', () => {
  it('reads YYYYMMDD with or without a time, and refuses dates not of the calendar', () => {
    assert.equal(readHl7Date('19800214', 'PID-7.1'), '1980-02-14');
    assert.equal(readHl7Date('198002141230', 'PID-7.1'), '1980-02-14');
    assert.equal(readHl7Date('20240229000000+0100', 'PID-7.1'), '2024-02-29');
    assert.equal(readHl7Date('', 'PID-7.1'), undefined);
    assert.throws(() => readHl7Date('20230229', 'PID-7.1'), /PID-7\.1 is not a date of the calendar/);
    assert.throws(() => readHl7Date('1980-02-14', 'PID-7.1'), /not a date/);
    assert.throws(() => readHl7Date('198002', 'PID-7.1'), /not a date/);
  });
});

describe('buildAck', () => {
  it('swaps sender and receiver, echoes MSH-10 in MSA-2, and carries the reason of an AE in MSA-3 and ERR-8', () => {
    const inbound = Hl7Message.parse('MSH|^~\\&|PAS|RHS|CRA|EYE|20260301||ADT^A08^ADT_A01|C42|P|2.4');
    const ack = buildAck(inbound, { code: 'AE', text: 'bad | date', errorCode: '102' });
    const msh = ack.getSegment('MSH')!;
    assert.deepEqual(
      [3, 4, 5, 6, 9, 11, 12].map((i) => msh.getField(i).toString()),
      ['CRA', 'EYE', 'PAS', 'RHS', 'ACK^A08^ACK', 'P', '2.4'],
    );
    assert.equal(ack.getSegment('MSA')!.toString(), 'MSA|AE|C42|bad \\F\\ date');
    assert.equal(ack.getSegment('ERR')!.toString(), 'ERR|||102|E||||bad \\F\\ date');
  });
});
