/*
 * Text from outside in the attempt log: a receiver's response excerpt and the errors of a request (status texts,
 * network and broker messages). It is untrusted input, and it is stored: PostgreSQL refuses U+0000 in a text
 * column, so a receiver answering `ok\0` made its attempt's write fail (with every outcome written beside it).
 * Every attempt is made storable here, in the one place all outcomes pass through on their way to the log
 * (`WebhookDeliveryService.recordAttempts`), whichever destination produced them: both databases then store
 * the same text, and the API shows it.
 */

/** The most bytes (UTF-8) of a response excerpt or an error stored with an attempt: SPEC §9's "first 2 KB". */
export const ATTEMPT_TEXT_MAX_BYTES = 2_048;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * `text` as it can be stored on both databases: U+0000 replaced by U+FFFD, unpaired surrogates (which no UTF-8
 * encodes) replaced by U+FFFD, and cut to at most `maxBytes` of UTF-8 on a code point boundary (a character that
 * does not fit whole is left out, never stored as half a character).
 */
export function storableText(text: string | null, maxBytes = ATTEMPT_TEXT_MAX_BYTES): string | null {
  if (text === null) return null;
  // Encoding replaces unpaired surrogates with U+FFFD (the WHATWG encoder's rule).
  const bytes = encoder.encode(text.replaceAll("\0", "\uFFFD"));
  if (bytes.length <= maxBytes) return decoder.decode(bytes);
  let cut = maxBytes;
  // A byte 10xxxxxx continues the character before it: cut before that character starts.
  while (cut > 0 && (bytes[cut]! & 0xc0) === 0x80) cut--;
  return decoder.decode(bytes.subarray(0, cut));
}

/**
 * The error recorded instead of the receiver's text when the outcome as received could not be written (see
 * `withoutReceiverText`): the status code and the verdict stand, the excerpt is dropped.
 */
export const ANSWER_NOT_STORED =
  "the answer could not be stored as received: its status code is kept, its response excerpt was dropped";
