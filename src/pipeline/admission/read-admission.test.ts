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
    const admission = new ReadAdmission({ readsPerTurn: 3, maxReadsInFlight: 100, turnTargetMs: 0 });
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
    const admission = new ReadAdmission({ readsPerTurn: 3, maxReadsInFlight: 100, turnTargetMs: 0 });
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
    const admission = new ReadAdmission({ readsPerTurn: 100, maxReadsInFlight: 2, turnTargetMs: 0 });
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
    const admission = new ReadAdmission({ readsPerTurn: 1, maxReadsInFlight: 100, turnTargetMs: 0 });
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

  it("gives the places that free up to each organization in turn, each one's reads in arrival order", async () => {
    const admission = new ReadAdmission({ readsPerTurn: 100, maxReadsInFlight: 2, turnTargetMs: 0 });
    const started: string[] = [];
    const dones: (() => void)[] = [];
    const read = (name: string, party: string) =>
      admission.admit((done) => {
        started.push(name);
        dones.push(done);
      }, party);
    // A floods: two run, eight wait. B sends one read after them, C two.
    for (let index = 0; index < 10; index++) read(`a${index}`, "A");
    read("b0", "B");
    read("c0", "C");
    read("c1", "C");
    expect(started).toEqual(["a0", "a1"]);
    expect(admission.queued).toBe(11);

    dones[0]!();
    dones[1]!();
    await nextTurn();
    // The two free places: A's next, then B's (not A's eight first).
    expect(started).toEqual(["a0", "a1", "a2", "b0"]);
    dones[2]!();
    dones[3]!();
    await nextTurn();
    expect(started.slice(4)).toEqual(["c0", "a3"]);
    dones[4]!();
    dones[5]!();
    await nextTurn();
    expect(started.slice(6)).toEqual(["c1", "a4"]);
    expect(admission.queued).toBe(5);
  });

  it("gives one busy organization every place while no other waits", async () => {
    const admission = new ReadAdmission({ readsPerTurn: 3, maxReadsInFlight: 100, turnTargetMs: 0 });
    const started: number[] = [];
    for (let index = 0; index < 9; index++) admission.admit(() => started.push(index), "A");
    await nextTurn();
    await nextTurn();
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it("refuses limits below one", () => {
    expect(() => new ReadAdmission({ readsPerTurn: 0, maxReadsInFlight: 1, turnTargetMs: 0 })).toThrow(RangeError);
    expect(() => new ReadAdmission({ readsPerTurn: 1, maxReadsInFlight: 0, turnTargetMs: 0 })).toThrow(RangeError);
    expect(() => new ReadAdmission({ readsPerTurn: 1, maxReadsInFlight: 1, turnTargetMs: -1 })).toThrow(RangeError);
  });
});

describe("read admission's share of a turn, aiming at the turn's target length", () => {
  /** An admission aiming at 10 ms turns, on a clock the test moves: each turn lasts what the test says. */
  function adaptive(readsPerTurn: number) {
    const clock = { now: 0 };
    const admission = new ReadAdmission({
      readsPerTurn,
      maxReadsInFlight: 1_000,
      turnTargetMs: 10,
      now: () => clock.now,
    });
    return { admission, clock };
  }

  /** Lets one turn of `ms` pass; returns how many reads its end admitted. */
  async function turnOf(ms: number, clock: { now: number }, started: readonly number[]) {
    const before = started.length;
    clock.now += ms;
    await nextTurn();
    return started.length - before;
  }

  it("admits one read more after each turn shorter than the target, up to readsPerTurn", async () => {
    const { admission, clock } = adaptive(7);
    const { started } = offer(admission, 100);
    // A server starts with a share of 4 (the first turn's length is not known yet).
    expect(started).toHaveLength(4);
    expect(await turnOf(2, clock, started)).toBe(4);
    const shares = [];
    for (let turn = 0; turn < 5; turn++) shares.push(await turnOf(2, clock, started));
    expect(shares).toEqual([5, 6, 7, 7, 7]);
    expect(started).toEqual(Array.from({ length: started.length }, (_, i) => i));
  });

  it("halves the share after a turn longer than the target, never below the 4 it starts with", async () => {
    const { admission, clock } = adaptive(64);
    const { started } = offer(admission, 1_000);
    await turnOf(1, clock, started);
    for (let turn = 0; turn < 28; turn++) await turnOf(1, clock, started);
    expect(admission.turnShare).toBe(32);
    expect(await turnOf(25, clock, started)).toBe(16);
    expect(await turnOf(25, clock, started)).toBe(8);
    expect(await turnOf(25, clock, started)).toBe(4);
    expect(await turnOf(25, clock, started)).toBe(4);
    expect(await turnOf(3, clock, started)).toBe(5);
  });

  it("does not count a wait for I/O with nothing admitted or waiting as a turn's length", async () => {
    const { admission, clock } = adaptive(64);
    const first = offer(admission, 10);
    await turnOf(1, clock, first.started);
    await turnOf(1, clock, first.started);
    expect(first.started).toHaveLength(10);
    expect(admission.queued).toBe(0);
    // The last turn's end admitted reads, so one more end follows; it finds nothing to do.
    await turnOf(1, clock, first.started);
    const share = admission.turnShare;
    // The loop then waits 500 ms for I/O before reads come again: no turn lasted that long.
    clock.now += 500;
    const later = offer(admission, 200);
    await turnOf(1, clock, later.started);
    expect(admission.turnShare).toBeGreaterThanOrEqual(share);
  });
});
