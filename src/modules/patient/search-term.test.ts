import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  applyPad,
  matchIdentifier,
  parseDayMonthYear,
  parseSearchTerm,
  translatePcre,
} from './search-term.ts';

const parse = (term: string, isDobMandatory = false) => parseSearchTerm(term, { isDobMandatory });

describe('parseSearchTerm', () => {
  it('reads "Last, First" as surname and first name', () => {
    assert.deepEqual(parse('Smith, John'), {
      kind: 'name',
      protocol: undefined,
      lastName: 'Smith',
      firstName: 'John',
      dob: undefined,
    });
  });

  it('reads "First Last" with the surname being everything after the first space', () => {
    const parsed = parse('Mary Ann Smith');
    assert.equal(parsed.kind, 'name');
    if (parsed.kind !== 'name') return;
    assert.equal(parsed.firstName, 'Mary');
    assert.equal(parsed.lastName, 'Ann Smith');
  });

  it('reads a single word as a surname', () => {
    assert.deepEqual(parse('  smi '), {
      kind: 'name',
      protocol: undefined,
      lastName: 'smi',
      firstName: '',
      dob: undefined,
    });
  });

  it('reads a trailing dd/mm/yyyy or dd-mm-yyyy date', () => {
    const a = parse('Smith, John 01/02/1980');
    const b = parse('Smith 1-2/1980');
    assert.equal(a.kind === 'name' && a.dob, '1980-02-01');
    assert.equal(b.kind === 'name' && b.dob, '1980-02-01');
    assert.equal(b.kind === 'name' && b.lastName, 'Smith');
  });

  it('makes two-digit years and impossible dates invalid', () => {
    assert.deepEqual(parse('Smith 01/02/80'), { kind: 'invalid' });
    assert.deepEqual(parse('Smith 31/02/1980'), { kind: 'invalid' });
    assert.deepEqual(parse('Smith 29/02/1981'), { kind: 'invalid' });
    assert.equal(parse('Smith 29/02/1980').kind, 'name');
  });

  it('keeps punctuation and wildcards in names as literal text', () => {
    const parsed = parse("O'Brien%_\\");
    assert.equal(parsed.kind === 'name' && parsed.lastName, "O'Brien%_\\");
  });

  it('treats terms with digits in the name part, or starting with a digit, as identifiers', () => {
    assert.deepEqual(parse('450 557-7104'), { kind: 'identifier', protocol: undefined, value: '4505577104' });
    assert.deepEqual(parse('01/02/1980'), { kind: 'identifier', protocol: undefined, value: '01/02/1980' });
    assert.equal(parse('Smith2').kind, 'identifier');
  });

  it('reads a protocol only when the term has exactly one colon, and strips up to the last colon', () => {
    assert.deepEqual(parse('NHS:450 557 7104'), { kind: 'identifier', protocol: 'nhs', value: '4505577104' });
    assert.deepEqual(parse('a:b:123'), { kind: 'identifier', protocol: undefined, value: '123' });
    const named = parse('any:Smith');
    assert.equal(named.kind === 'name' && named.protocol, 'any');
  });

  it('answers invalid for empty, blank, protocol-only, comma-only and over-long terms', () => {
    for (const term of ['', '   ', 'any:', ' , ', 'x'.repeat(201), 'Smi\u0000th']) {
      assert.deepEqual(parse(term), { kind: 'invalid' }, JSON.stringify(term));
    }
    assert.equal(parse('x'.repeat(200)).kind, 'name');
  });

  it('does not treat a name without a date as a name when dob_mandatory_in_search is on', () => {
    assert.equal(parse('Smith', true).kind, 'identifier');
    assert.equal(parse('Smith 01/02/1980', true).kind, 'name');
  });

  it('allows a date with an empty name part after a comma', () => {
    const parsed = parse(', 01/02/1980');
    assert.equal(parsed.kind === 'name' && parsed.dob, '1980-02-01');
  });
});

describe('parseDayMonthYear', () => {
  it('needs four-digit years and real dates', () => {
    assert.equal(parseDayMonthYear('9/12/2001'), '2001-12-09');
    assert.equal(parseDayMonthYear('00/12/2001'), undefined);
    assert.equal(parseDayMonthYear('1/13/2001'), undefined);
    assert.equal(parseDayMonthYear('1/1/201'), undefined);
  });
});

describe('translatePcre', () => {
  it('strips delimiters and maps flags i, m, s, u', () => {
    const regex = translatePcre('/^([0-9]{3}[- ]?[0-9]{3}[- ]?[0-9]{4})$/i');
    assert.ok(regex);
    assert.equal(regex.flags, 'i');
    assert.ok(regex.test('450 557 7104'));
    assert.equal(translatePcre('#^a/b$#ms')?.source, '^a\\/b$');
    assert.ok(translatePcre('{^ab$}')?.test('ab'));
    assert.ok(translatePcre('/^\\/x$/')?.test('/x'));
  });

  it('rejects the x flag, unknown flags, missing delimiters and broken patterns', () => {
    for (const pattern of ['/^a b$/x', '/a/D', '^abc$', 'a', '/(/', '', '/abc']) {
      assert.equal(translatePcre(pattern), undefined, pattern);
    }
  });
});

describe('applyPad and matchIdentifier', () => {
  it('pads with zeros, spaces or not at all', () => {
    assert.equal(applyPad('1234', '%07s'), '0001234');
    assert.equal(applyPad('1234', '%7s'), '   1234');
    assert.equal(applyPad('1234', '%s'), '1234');
    assert.equal(applyPad('1234', null), '1234');
    assert.equal(applyPad('123456789', '%07s'), '123456789');
  });

  it('returns the whole match of the padded term, as the LOCAL and GLOBAL defaults do', () => {
    const local = { regex: translatePcre('/^([0-9]{1,9})$/'), pad: '%07s' };
    const global = { regex: translatePcre('/^([0-9]{3}[- ]?[0-9]{3}[- ]?[0-9]{4})$/i'), pad: null };
    assert.equal(matchIdentifier('1234', local), '0001234');
    assert.equal(matchIdentifier('123456789', local), '123456789');
    assert.equal(matchIdentifier('4505577104', local), undefined);
    assert.equal(matchIdentifier('4505577104', global), '4505577104');
    assert.equal(matchIdentifier('12a', local), undefined);
    assert.equal(matchIdentifier('1234', { regex: undefined, pad: null }), undefined);
  });
});
