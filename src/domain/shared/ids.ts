import { v7 as uuidv7, validate as validateUuid } from "uuid";

/** UUIDv7: sorts by creation time, so an id is also a keyset position for newest-first listings. */
export function newId(): string {
  return uuidv7();
}

export function isUuid(value: unknown): value is string {
  return typeof value === "string" && validateUuid(value);
}
