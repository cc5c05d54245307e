/**
 * PASAPI's XML: reading a request body into a small element tree, and writing the `<Success>` /
 * `<Failure>` answers.
 *
 * Reading is gated before the parser sees a byte beyond the gate: the body size is bounded by the route,
 * a document type declaration (and so any entity declaration, internal or `SYSTEM`) is refused outright,
 * and the tree's depth and element count are bounded. fast-xml-parser checks well-formedness and builds
 * the tree with entity processing off; this file then decodes the five predefined entities and numeric
 * character references in one pass, refusing any other entity, so that nothing is ever expanded from a
 * declaration, a file or the network.
 *
 * Writing escapes every text (OpenEyes concatenates unescaped text, P30) and adds an XML declaration.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';

/** One element: its local name (namespace prefix dropped), attributes, text and child elements. */
export interface XmlElement {
  readonly name: string;
  readonly attributes: Readonly<Record<string, string>>;
  /** The concatenated text directly inside the element, decoded, untrimmed. */
  readonly text: string;
  readonly children: readonly XmlElement[];
}

/** Why a body could not be read: the messages of the `<Failure>` answer. */
export class XmlReadError extends Error {
  readonly errors: readonly string[];
  constructor(errors: readonly string[]) {
    super(errors.join('; '));
    this.name = 'XmlReadError';
    this.errors = errors;
  }
}

const MAX_DEPTH = 8;
const MAX_ELEMENTS = 2000;

const parser = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: '',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  removeNSPrefix: true,
  processEntities: false,
  htmlEntities: false,
  ignoreDeclaration: true,
  ignorePiTags: true,
});

const PREDEFINED: Readonly<Record<string, string>> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

/** Decodes predefined entities and character references; any other entity reference is refused. */
export function decodeXmlText(raw: string): string {
  if (!raw.includes('&')) return raw;
  return raw.replace(/&([^;&\s]{0,10});|&/g, (whole, name: string | undefined) => {
    if (name === undefined) throw new XmlReadError(['Malformed XML: a bare "&" in text']);
    const predefined = PREDEFINED[name];
    if (predefined !== undefined) return predefined;
    const numeric = /^#(?:x([0-9a-fA-F]{1,6})|([0-9]{1,7}))$/.exec(name);
    if (numeric !== null) {
      const code = numeric[1] !== undefined ? parseInt(numeric[1], 16) : Number(numeric[2]);
      const isXmlChar =
        code === 0x9 ||
        code === 0xa ||
        code === 0xd ||
        (code >= 0x20 && code <= 0xd7ff) ||
        (code >= 0xe000 && code <= 0xfffd) ||
        (code >= 0x10000 && code <= 0x10ffff);
      if (isXmlChar) return String.fromCodePoint(code);
    }
    throw new XmlReadError([`Malformed XML: the entity reference ${whole.slice(0, 12)} is not accepted`]);
  });
}

type OrderedNode = Record<string, unknown>;

/** The root element of `body`; throws {@link XmlReadError} with the Failure's messages. */
export function readXml(body: string): XmlElement {
  if (body.trim() === '') throw new XmlReadError(['Missing Resource Body']);
  // A DTD is what entity expansion (billion laughs) and external entities need: none is accepted.
  if (/<!DOCTYPE|<!ENTITY/i.test(body))
    throw new XmlReadError(['Malformed XML: document type declarations are not accepted']);
  const valid = XMLValidator.validate(body);
  if (valid !== true) {
    const where = valid.err.line === undefined ? '' : ` (line ${valid.err.line})`;
    throw new XmlReadError([`Malformed XML: ${valid.err.msg}${where}`]);
  }
  const nodes = parser.parse(body) as OrderedNode[];
  const roots = nodes.filter((n) => elementName(n) !== undefined);
  if (roots.length !== 1) throw new XmlReadError(['Malformed XML: one root element expected']);
  const counter = { elements: 0 };
  return toElement(roots[0]!, 1, counter);
}

function elementName(node: OrderedNode): string | undefined {
  return Object.keys(node).find((k) => k !== ':@' && k !== '#text' && k !== '#comment');
}

function toElement(node: OrderedNode, depth: number, counter: { elements: number }): XmlElement {
  counter.elements += 1;
  if (depth > MAX_DEPTH || counter.elements > MAX_ELEMENTS)
    throw new XmlReadError(['Malformed XML: the document is nested too deeply or has too many elements']);
  const name = elementName(node)!;
  const attributes: Record<string, string> = {};
  const rawAttributes = (node[':@'] ?? {}) as Record<string, unknown>;
  for (const [key, value] of Object.entries(rawAttributes))
    attributes[key] = decodeXmlText(typeof value === 'string' ? value : '');
  let text = '';
  const children: XmlElement[] = [];
  for (const child of (node[name] ?? []) as OrderedNode[]) {
    if ('#text' in child) text += decodeXmlText(String(child['#text']));
    else if (elementName(child) !== undefined) children.push(toElement(child, depth + 1, counter));
  }
  return { name, attributes, text, children };
}

/** Escapes text for element content (the answers carry no attributes). */
export function escapeXml(text: string): string {
  return text.replace(/[<>&]/g, (c) => (c === '<' ? '&lt;' : c === '>' ? '&gt;' : '&amp;'));
}

const DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n';

/** `<Success>` as OpenEyes shapes it: Id when known, Message, Warnings when there are any. */
export function successXml(message: string, id: number | undefined, warnings: readonly string[]): string {
  const idPart = id === undefined ? '' : `<Id>${id}</Id>`;
  const warningPart =
    warnings.length === 0
      ? ''
      : `<Warnings>${warnings.map((w) => `<Warning>${escapeXml(w)}</Warning>`).join('')}</Warnings>`;
  return `${DECLARATION}<Success>${idPart}<Message>${escapeXml(message)}</Message>${warningPart}</Success>`;
}

/** `<Failure><Errors><Error>…</Error>…</Errors></Failure>`. */
export function failureXml(errors: readonly string[]): string {
  return `${DECLARATION}<Failure><Errors>${errors.map((e) => `<Error>${escapeXml(e)}</Error>`).join('')}</Errors></Failure>`;
}
