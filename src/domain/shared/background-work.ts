/*
 * Background work: what runs for no single request (the webhook worker's claims and attempts, the live feed's
 * reads, a replay's batches) but is often set off from one (a commit wakes the worker, a subscription starts the
 * feed's polls, a mutation starts a replay). A trace context, once carried (src/tracing/), follows every callback,
 * timer and promise made from a request; work that outlives the request would then land in its trace, long after
 * it ended. Each such piece of work starts through `runInBackground`, which runs it detached from whatever
 * request is calling: with traces on, in the root context, so that its statements are traces of their own.
 *
 * Process-wide, as the context manager it goes with: the tracing SDK sets the runner once when it installs that
 * manager (src/tracing/tracing-sdk.ts). With traces off (the default) it calls the work, and nothing else.
 */

/** Runs `work` now, in no request's context, and returns what it returns. */
export type BackgroundRunner = <T>(work: () => T) => T;

const direct: BackgroundRunner = (work) => work();

let runner: BackgroundRunner = direct;

/** Runs `work` now, detached from the request (if any) whose call stack this is; returns what `work` returns. */
export function runInBackground<T>(work: () => T): T {
  return runner(work);
}

/** Sets how background work is detached (the tracing SDK, once per process). */
export function setBackgroundRunner(run: BackgroundRunner): void {
  runner = run;
}
