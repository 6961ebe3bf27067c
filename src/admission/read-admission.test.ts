import { describe, expect, it } from "@jest/globals";
import { ReadAdmission } from "./read-admission.ts";

/** Resolves in the check phase of the event loop's next turn (after the immediates queued before it). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Offers reads 0..count-1; records the order they start in and keeps each one's `done`. */
function offer(admission: ReadAdmission, count: number) {
  const started: number[] = [];
  const dones = new Map<number, () => void>();
  for (let read = 0; read < count; read++) {
    admission.admit((done) => {
      started.push(read);
      dones.set(read, done);
    });
  }
  return { started, dones };
}

describe("read admission", () => {
  it("starts at most readsPerTurn reads in a turn and the next ones in later turns, in arrival order", async () => {
    const admission = new ReadAdmission({ readsPerTurn: 3, maxReadsInFlight: 100 });
    const { started, dones } = offer(admission, 8);
    expect(started).toEqual([0, 1, 2]);
    expect(admission.queued).toBe(5);
    for (const done of dones.values()) done();

    await nextTurn();
    expect(started).toEqual([0, 1, 2, 3, 4, 5]);
    await nextTurn();
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(admission.queued).toBe(0);
  });

  it("admits a single read in the turn after one that accepted a connection, and readsPerTurn once none arrive", async () => {
    const admission = new ReadAdmission({ readsPerTurn: 3, maxReadsInFlight: 100 });
    const { started } = offer(admission, 9);
    expect(started).toEqual([0, 1, 2]);
    admission.connectionAccepted();

    await nextTurn();
    expect(started).toEqual([0, 1, 2, 3]);
    admission.connectionAccepted();
    await nextTurn();
    expect(started).toEqual([0, 1, 2, 3, 4]);
    await nextTurn();
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it("holds reads beyond maxReadsInFlight until one is done, and counts a done called twice once", async () => {
    const admission = new ReadAdmission({ readsPerTurn: 100, maxReadsInFlight: 2 });
    const { started, dones } = offer(admission, 4);
    expect(started).toEqual([0, 1]);

    await nextTurn();
    expect(started).toEqual([0, 1]);

    dones.get(0)!();
    dones.get(0)!();
    await nextTurn();
    expect(started).toEqual([0, 1, 2]);
    expect(admission.running).toBe(2);

    dones.get(1)!();
    dones.get(2)!();
    await nextTurn();
    expect(started).toEqual([0, 1, 2, 3]);
    expect(admission.running).toBe(1);
  });

  it("lets a read arriving after waiting ones queue behind them, even when a place is free", async () => {
    const admission = new ReadAdmission({ readsPerTurn: 1, maxReadsInFlight: 100 });
    const first = offer(admission, 2);
    first.dones.get(0)!();
    const later = offer(admission, 1);
    expect(first.started).toEqual([0]);
    expect(later.started).toEqual([]);

    await nextTurn();
    expect(first.started).toEqual([0, 1]);
    expect(later.started).toEqual([]);
    await nextTurn();
    expect(later.started).toEqual([0]);
  });

  it("refuses limits below one", () => {
    expect(() => new ReadAdmission({ readsPerTurn: 0, maxReadsInFlight: 1 })).toThrow(RangeError);
    expect(() => new ReadAdmission({ readsPerTurn: 1, maxReadsInFlight: 0 })).toThrow(RangeError);
  });
});
