/*
 * The throttle's schedule (SPEC §9.3, `max_deliveries_per_second`; docs/decisions/0100-webhook-throttle-gcra.md).
 * Glossary:
 * - emission interval: the time between two slots of one endpoint, `SPREAD_MS / max` (rounded up to a microsecond);
 * - theoretical arrival time (TAT): the endpoint's next free slot, stored in the database and moved by the claim
 *   (GCRA with no burst: the claim gives its deliveries slots from max(TAT, now), one interval apart);
 * - slot: the instant a leased delivery may start, at the earliest; it must start within START_TOLERANCE_MS of it,
 *   else it is handed back unsent (no attempt) and a later claim gives it a new slot.
 *
 * Why the numbers hold "at most `max` in any one-second window, wherever it starts": the requests that start in a
 * window [a, a + 1 s) have slots in [a − tolerance, a + 1 s), an interval of 1 s + tolerance. Slots are one
 * interval apart, so it holds at most ⌈(1 s + tolerance) / interval⌉ of them; with the interval spread over
 * SPREAD_MS = 1 s + 2 × tolerance that is `max`, and the second tolerance is left for what happens after the start
 * (the connection, the receiver's own clock). The cost: an endpoint drains at max × 1 s / SPREAD_MS, 10 % under its
 * maximum.
 */

/** A request starts at most this long after its slot, or not at all (handed back). */
export const THROTTLE_START_TOLERANCE_MS = 50;

/** The time over which `max` slots are spread: one second and twice the start tolerance (see above). */
export const THROTTLE_SPREAD_MS = 1_000 + 2 * THROTTLE_START_TOLERANCE_MS;

/**
 * A claim gives slots at most this far ahead of its time: deliveries are leased for the next second of their
 * endpoint's schedule, not its whole backlog (a lease must outlast its slot and request).
 */
export const THROTTLE_HORIZON_MS = 1_000;

/** The emission interval of an endpoint throttled at `maxPerSecond`, in microseconds (the claim computes the same). */
export function emissionIntervalUs(maxPerSecond: number): number {
  return Math.ceil((THROTTLE_SPREAD_MS * 1_000) / maxPerSecond);
}

/** Whether a request with this slot may start at `at` (a delivery with no slot always may). */
export function isWithinSlot(slotAt: Date | null, at: Date): boolean {
  return slotAt === null || at.getTime() - slotAt.getTime() <= THROTTLE_START_TOLERANCE_MS;
}
