import { computeCheckDigit } from "../../src/domain/references/container-number.ts";

/** A valid ISO 6346 container number: `owner` (four letters ending in U), a six-digit serial, its check digit. */
export function containerNumber(owner: string, serial: number): string {
  const firstTen = `${owner}${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}
