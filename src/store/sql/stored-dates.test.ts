import { describe, expect, it } from "@jest/globals";
import { toDate } from "./rows.ts";
import { storedDate } from "./stored-dates.ts";

/** The stored forms of one instant: SQLite's (`Z`, `+00:00`), PostgreSQL's JSON and its column text. */
function storedForms(date: Date): string[] {
  const iso = date.toISOString();
  const plain = iso.slice(0, 23);
  // PostgreSQL drops the fraction's trailing zeros, and the point with them.
  const column = plain.replace("T", " ").replace(/\.?0+$/, "");
  return [iso, `${plain}+00:00`, plain, plain.replace("T", " "), column];
}

describe("timestamps read from the store", () => {
  it("read every stored form of an instant as the instant, formatted as Date formats it", () => {
    const instants = [
      "0001-01-01T00:00:00.000Z",
      "0099-12-31T23:59:59.999Z",
      "1999-12-31T23:59:59.990Z",
      "2000-02-29T12:00:00.100Z",
      "2024-02-29T00:00:00.000Z",
      "2026-11-25T16:41:07.305Z",
      "9999-12-31T23:59:59.999Z",
    ].map((text) => new Date(text));
    // And a spread of instants over the years the store holds.
    for (let step = 0; step < 2_000; step++) instants.push(new Date(Date.UTC(1970, 0, 1) + step * 7_919_993_117));
    for (const instant of instants) {
      for (const form of storedForms(instant)) {
        const read = storedDate(form);
        expect({ form, time: read?.getTime(), iso: read?.toISOString() }).toEqual({
          form,
          time: instant.getTime(),
          iso: instant.toISOString(),
        });
        expect(read?.toJSON()).toBe(instant.toISOString());
      }
    }
  });

  it("leaves other text and dates that do not exist to Date's parser", () => {
    for (const text of [
      "2026-02-29T00:00:00.000Z",
      "2026-13-01T00:00:00.000Z",
      "2026-01-01T24:00:00.000Z",
      "2026-01-01T00:60:00.000Z",
      "2026-01-01T00:00:00.000+01:00",
      "2026-01-01T00:00:00.1234",
      "2026-01-0aT00:00:00.000Z",
      "0000-01-01T00:00:00.000Z",
      "2026/01/01 00:00:00",
    ]) {
      expect({ text, read: storedDate(text) }).toEqual({ text, read: undefined });
    }
    expect(toDate("2026-01-01T00:00:00.000+01:00").toISOString()).toBe("2025-12-31T23:00:00.000Z");
  });

  it("formats a read instant afresh once it is changed", () => {
    const read = storedDate("2026-11-25T16:41:07.305+00:00")!;
    read.setUTCFullYear(2027);
    expect(read.toISOString()).toBe("2027-11-25T16:41:07.305Z");
  });
});
