import { describe, expect, it } from "@jest/globals";
import { CompiledLater } from "./compiled-later.ts";

describe("CompiledLater", () => {
  it("compiles on first use, once", () => {
    const later = new CompiledLater();
    let runs = 0;
    const compiled = later.add(() => ++runs);
    expect(runs).toBe(0);
    expect(compiled()).toBe(1);
    expect(compiled()).toBe(1);
    expect(runs).toBe(1);
    expect(later.remaining).toBe(0);
  });

  it("compiles what is left in the background, one per turn, and never again on use", async () => {
    const later = new CompiledLater();
    const order: string[] = [];
    const first = later.add(() => order.push("first"));
    later.add(() => order.push("second"));
    later.add(() => order.push("third"));
    first();
    const background = later.compileInBackground();
    // Nothing runs inside the caller's turn: the next compilation waits for the check phase.
    expect(order).toEqual(["first"]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual(["first", "second"]);
    await background;
    expect(order).toEqual(["first", "second", "third"]);
    expect(later.remaining).toBe(0);
    first();
    expect(order).toHaveLength(3);
  });

  it("stops compiling in the background once stopped", async () => {
    const later = new CompiledLater();
    const ran: number[] = [];
    for (let index = 0; index < 5; index++) later.add(() => ran.push(index));
    const background = later.compileInBackground();
    await new Promise((resolve) => setImmediate(resolve));
    later.stop();
    await background;
    expect(ran).toEqual([0]);
    expect(later.remaining).toBe(4);
  });

  it("leaves a compilation that fails in the background to fail again on its first use", async () => {
    const later = new CompiledLater();
    let attempts = 0;
    const broken = later.add(() => {
      attempts += 1;
      throw new Error(`schema is invalid (attempt ${attempts})`);
    });
    const fine = later.add(() => "compiled");
    await later.compileInBackground();
    expect(attempts).toBe(1);
    expect(later.remaining).toBe(0);
    expect(fine()).toBe("compiled");
    expect(() => broken()).toThrow("schema is invalid (attempt 2)");
  });
});
