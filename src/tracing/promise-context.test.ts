import { afterEach, beforeEach, describe, expect, it } from "@jest/globals";
import { createContextKey, ROOT_CONTEXT, type Context } from "@opentelemetry/api";
import { setImmediate as nextTurn } from "node:timers/promises";
import { PromiseContextManager } from "./promise-context.ts";

const REQUEST = createContextKey("request");
const contextOf = (name: string): Context => ROOT_CONTEXT.setValue(REQUEST, name);
const nameIn = (context: Context) => context.getValue(REQUEST);

describe("the trace context carried by promise hooks", () => {
  let manager: PromiseContextManager;
  beforeEach(() => {
    manager = new PromiseContextManager().enable();
  });
  afterEach(() => {
    manager.disable();
  });

  it("follows an async function across awaits, a turn of the event loop included", async () => {
    const seen = await manager.with(contextOf("a"), async () => {
      await Promise.resolve();
      const afterMicrotask = nameIn(manager.active());
      await nextTurn();
      return [afterMicrotask, nameIn(manager.active())];
    });
    expect(seen).toEqual(["a", "a"]);
    expect(manager.active()).toBe(ROOT_CONTEXT);
  });

  it("keeps concurrent chains apart, each with its own context", async () => {
    const chain = async (name: string, turns: number) =>
      manager.with(contextOf(name), async () => {
        const seen: unknown[] = [];
        for (let turn = 0; turn < turns; turn++) {
          await (turn % 2 === 0 ? nextTurn() : Promise.resolve());
          seen.push(nameIn(manager.active()));
        }
        return seen;
      });
    const [a, b] = await Promise.all([chain("a", 5), chain("b", 7)]);
    expect(a).toEqual(Array(5).fill("a"));
    expect(b).toEqual(Array(7).fill("b"));
  });

  it("runs a `then` callback in the context where `then` was called", async () => {
    const settled = Promise.resolve(1);
    const seen = await manager.with(contextOf("a"), () => settled.then(() => nameIn(manager.active())));
    expect(seen).toBe("a");
  });

  it("restores the outer context after `with`, also when the function throws", () => {
    manager.with(contextOf("outer"), () => {
      expect(() =>
        manager.with(contextOf("inner"), () => {
          throw new Error("boom");
        }),
      ).toThrow("boom");
      expect(nameIn(manager.active())).toBe("outer");
    });
    expect(manager.active()).toBe(ROOT_CONTEXT);
  });

  it("does not carry a context into a callback queued outside promises, unless it is bound", async () => {
    const unbound = await manager.with(
      contextOf("a"),
      () => new Promise((resolve) => process.nextTick(() => resolve(nameIn(manager.active())))),
    );
    const bound = await manager.with(
      contextOf("a"),
      () =>
        new Promise((resolve) =>
          process.nextTick(manager.bind(manager.active(), () => resolve(nameIn(manager.active())))),
        ),
    );
    expect([unbound, bound]).toEqual([undefined, "a"]);
  });

  it("carries nothing once disabled", async () => {
    manager.disable();
    const seen = await manager.with(contextOf("a"), async () => {
      await nextTurn();
      return manager.active();
    });
    expect(seen).toBe(ROOT_CONTEXT);
  });
});
