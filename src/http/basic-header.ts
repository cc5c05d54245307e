/**
 * The `Authorization: Basic` header's credentials. Here, below the modules, because both the Basic guard
 * (the username its failure brake counts) and the user module's authenticator read them.
 */

/** Splits `Basic <base64(user:password)>`; undefined when the header is not well-formed Basic. */
export function parseBasicHeader(
  header: string | undefined,
): { username: string; password: string } | undefined {
  if (header === undefined || header.length > 4096) return undefined;
  const match = /^basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i.exec(header);
  if (match === null || match[1]!.length % 4 === 1) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64');
  // Reject text that is not valid UTF-8 rather than guessing at its meaning.
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(decoded);
  } catch {
    return undefined;
  }
  const colon = text.indexOf(':');
  // A NUL cannot be part of a username (PostgreSQL text refuses it): malformed, not a lookup.
  if (colon <= 0 || text.slice(0, colon).includes('\u0000')) return undefined;
  return { username: text.slice(0, colon), password: text.slice(colon + 1) };
}
