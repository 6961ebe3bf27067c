import { describe, expect, it } from "@jest/globals";
import { isValidSpanId, isValidTraceId } from "@opentelemetry/api";
import { PooledRandomIds } from "./pooled-ids.ts";

describe("PooledRandomIds", () => {
  it("gives valid, distinct trace and span ids, also across the pool's refills", () => {
    const ids = new PooledRandomIds();
    const traceIds = new Set<string>();
    const spanIds = new Set<string>();
    // More ids than one pool holds, trace and span ids drawn in turn.
    for (let i = 0; i < 5_000; i++) {
      const traceId = ids.generateTraceId();
      const spanId = ids.generateSpanId();
      expect(isValidTraceId(traceId)).toBe(true);
      expect(isValidSpanId(spanId)).toBe(true);
      traceIds.add(traceId);
      spanIds.add(spanId);
    }
    expect(traceIds.size).toBe(5_000);
    expect(spanIds.size).toBe(5_000);
  });

  it("does not repeat a pool: two generators, and one after its refills, draw different ids", () => {
    const first = new PooledRandomIds();
    const second = new PooledRandomIds();
    const drawn = new Set<string>();
    for (let i = 0; i < 3_000; i++) {
      drawn.add(first.generateSpanId());
      drawn.add(second.generateSpanId());
    }
    expect(drawn.size).toBe(6_000);
  });
});
