/*
 * Text as UTF-8 in a Buffer of its own, encoded once. `Buffer.from(text)` (and `Buffer.byteLength`) first walks the
 * string a character at a time to measure its UTF-8 length, then encodes it: for a GraphQL answer of 20 events
 * that walk was about 86,000 instructions, 4 % of the request (callgrind), and a REST page read from PostgreSQL
 * (34 KB) paid it too. Here the text is written into a reused area, which tells its length, and copied out.
 * Synchronous use only: one area serves every call.
 */

const area = Buffer.allocUnsafe(256 * 1024);

/** `text` followed by `suffix`, as UTF-8. */
export function utf8Bytes(text: string, suffix = ""): Buffer {
  // A UTF-16 code unit takes at most 3 bytes of UTF-8 (a surrogate pair, two units, takes 4).
  if ((text.length + suffix.length) * 3 > area.length) return Buffer.from(text + suffix);
  let length = area.write(text);
  if (suffix !== "") length += area.write(suffix, length);
  return Buffer.from(area.subarray(0, length));
}
