/**
 * ISO 6346 container numbers: 3-letter owner code, category letter (U, J or Z), 6-digit serial, check digit.
 * The check digit is the weighted sum (weights 2^position) of the letter values (A=10, skipping multiples of
 * 11) and digits, modulo 11, with 10 written as 0.
 */
const SHAPE = /^[A-Z]{3}[UJZ]\d{7}$/;

function letterValue(letter: string): number {
  // A=10, B=12 ... values that are multiples of 11 (11, 22, 33) are skipped.
  let value = 10;
  for (let code = "A".charCodeAt(0); code < letter.charCodeAt(0); code++) {
    value += 1;
    if (value % 11 === 0) value += 1;
  }
  return value;
}

export function computeCheckDigit(firstTen: string): number {
  let sum = 0;
  for (let i = 0; i < 10; i++) {
    const char = firstTen[i]!;
    const value = char >= "0" && char <= "9" ? Number(char) : letterValue(char);
    sum += value * 2 ** i;
  }
  return (sum % 11) % 10;
}

/** Upper-cases and strips whitespace, (`mscu 123 456 5` becomes `MSCU1234565`) before validating. */
export function normalizeContainerNumber(raw: string): string {
  return raw.replace(/\s+/g, "").toUpperCase();
}

export type ContainerNumberCheck = { ok: true; value: string } | { ok: false; code: string; message: string };

export function checkContainerNumber(raw: string): ContainerNumberCheck {
  const value = normalizeContainerNumber(raw);
  if (!SHAPE.test(value)) {
    return {
      ok: false,
      code: "INVALID_FORMAT",
      message: "must be an ISO 6346 container number: 3-letter owner code, U/J/Z, 6 digits and a check digit",
    };
  }
  const expected = computeCheckDigit(value.slice(0, 10));
  if (Number(value[10]) !== expected) {
    return { ok: false, code: "INVALID_CHECK_DIGIT", message: `the check digit should be ${expected}` };
  }
  return { ok: true, value };
}
