/**
 * Tag-name rules: surrounding whitespace trimmed, NFC-normalized, 1–100 Unicode code points, no
 * control characters. Names are compared case-insensitively through `tagNameKey`.
 */
export const MAX_TAG_NAME_LENGTH = 100;

export type TagNameCheck = { ok: true; name: string } | { ok: false; code: string; message: string };

// \p{Cc} covers C0, DEL and C1 controls.
const CONTROL_CHARACTER = /\p{Cc}/u;

export function normalizeTagName(raw: unknown): TagNameCheck {
  if (typeof raw !== "string") return { ok: false, code: "INVALID_TYPE", message: "name must be a string" };
  const name = raw.trim().normalize("NFC");
  const length = [...name].length;
  if (length === 0) return { ok: false, code: "TOO_SHORT", message: "name must not be empty" };
  if (length > MAX_TAG_NAME_LENGTH) {
    return { ok: false, code: "TOO_LONG", message: `name must be at most ${MAX_TAG_NAME_LENGTH} characters` };
  }
  if (CONTROL_CHARACTER.test(name)) {
    return { ok: false, code: "CONTROL_CHARACTER", message: "name must not contain control characters" };
  }
  return { ok: true, name };
}

/** The case-insensitive identity of a (normalized) name: `Urgent` and `urgent` share one key. */
export function tagNameKey(normalizedName: string): string {
  // toLowerCase of toUpperCase folds more pairs than toLowerCase alone (e.g. final sigma, "ß" vs "SS" is
  // deliberately not folded: they are different spellings for users). NFC again because case mapping can
  // denormalize.
  return normalizedName.toUpperCase().toLowerCase().normalize("NFC");
}

/** Tags in the order a reference lists them (case-insensitive name, then id), as the store reads them. */
export function sortTagsByName<T extends { readonly id: string; readonly name: string }>(tags: readonly T[]): T[] {
  const keyed = tags.map((tag) => ({ tag, key: tagNameKey(tag.name) }));
  keyed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.tag.id < b.tag.id ? -1 : 1));
  return keyed.map(({ tag }) => tag);
}
