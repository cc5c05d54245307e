import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  FormFieldError,
  boundaryOf,
  buildFormObject,
  effectiveContentType,
  handlerKindOf,
  normaliseMediaType,
  parseUrlEncoded,
} from './content-type.ts';

describe('effective content type (query `content_type`, else the header)', () => {
  it('lower-cases, trims and drops parameters', () => {
    assert.equal(normaliseMediaType(' Multipart/Form-Data ; boundary=x'), 'multipart/form-data');
    assert.equal(normaliseMediaType('application/json ;x'), 'application/json');
    assert.equal(normaliseMediaType('  '), undefined);
    assert.equal(normaliseMediaType(undefined), undefined);
  });

  it('takes a non-empty string override before the header', () => {
    assert.equal(effectiveContentType('Application/PDF', 'application/octet-stream'), 'application/pdf');
    assert.equal(effectiveContentType('', 'text/plain'), 'text/plain');
    assert.equal(effectiveContentType(['a/b', 'c/d'], 'text/plain'), 'text/plain');
    assert.equal(effectiveContentType(undefined, undefined), undefined);
  });

  it('selects the handler OpenEyes selects for the type', () => {
    assert.equal(handlerKindOf(undefined), 'none');
    assert.equal(handlerKindOf('application/json'), 'json');
    assert.equal(handlerKindOf('multipart/form-data'), 'multipart');
    assert.equal(handlerKindOf('application/x-www-form-urlencoded'), 'urlencoded');
    assert.equal(handlerKindOf('application/dicom'), 'raw');
  });

  it('finds the boundary, quoted or not', () => {
    assert.equal(boundaryOf('multipart/form-data; boundary=abc'), 'abc');
    assert.equal(boundaryOf('multipart/form-data; charset=utf-8; BOUNDARY="a b"'), 'a b');
    assert.equal(boundaryOf('multipart/form-data'), undefined);
    assert.equal(boundaryOf(undefined), undefined);
  });
});

describe('form fields', () => {
  it('builds nested objects and arrays from bracketed names', () => {
    const fields = buildFormObject(
      parseUrlEncoded('data[a][b]=1&data[list][]=x&data[list][]=y&plain=p+q&plain=r'),
    );
    assert.deepEqual(JSON.parse(JSON.stringify(fields)), {
      data: { a: { b: '1' }, list: ['x', 'y'] },
      plain: 'r',
    });
  });

  it('refuses non-ASCII or unsafe names, deep nesting and conflicts', () => {
    const refuses = (body: string, message: string) =>
      assert.throws(
        () => buildFormObject(parseUrlEncoded(body)),
        (e: unknown) => e instanceof FormFieldError && e.message === message,
      );
    refuses('data[a b]=1', 'Invalid form field name.');
    refuses('data[%C3%A9]=1', 'Invalid form field name.');
    refuses('da%0Ata=1', 'Invalid form field name.');
    refuses(`d${'[x]'.repeat(9)}=1`, 'Form fields are nested too deeply.');
    refuses('d=1&d[x]=2', 'Conflicting form fields.');
    refuses('d[]=1&d[x]=2', 'Conflicting form fields.');
    refuses('d=%E0%A4%A', 'Invalid text encoding.');
  });

  it('never touches Object.prototype whatever the names', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(fc.constantFrom('__proto__', 'constructor', 'prototype', 'data', 'x', ''), fc.string()),
          { maxLength: 6 },
        ),
        fc.string(),
        (segments, value) => {
          const name = segments.length === 0 ? 'data' : `data${segments.map(([s]) => `[${s}]`).join('')}`;
          try {
            buildFormObject([[name, value]]);
          } catch (error) {
            if (!(error instanceof FormFieldError)) throw error;
          }
          return (
            ({} as Record<string, unknown>).data === undefined && Object.keys(Object.prototype).length === 0
          );
        },
      ),
    );
  });
});
