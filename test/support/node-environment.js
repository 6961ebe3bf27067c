// Jest's Node environment, with one change: hooks default to 120 s while tests keep `testTimeout` (60 s). A
// hook creates databases and starts servers, which takes longest on a busy machine; jest has one default
// timeout for tests and hooks, and this event (sent before jest reads the hook's timeout) is where to split
// them. A hook given its own timeout keeps it.
import { TestEnvironment } from "jest-environment-node";

const HOOK_TIMEOUT_MS = 120_000;

export default class NodeEnvironmentWithHookTimeout extends TestEnvironment {
  /** @param {import("@jest/types").Circus.Event} event */
  handleTestEvent(event) {
    if (event.name === "hook_start") event.hook.timeout ??= HOOK_TIMEOUT_MS;
  }
}
