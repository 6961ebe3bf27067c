import { describe, expect, it } from "@jest/globals";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfig, parseDuration } from "./config.ts";

describe("durations in settings", () => {
  it("reads units from milliseconds to days, as ms does", () => {
    expect(parseDuration("250ms", "X")).toBe(250);
    expect(parseDuration(" 5s ", "X")).toBe(5_000);
    expect(parseDuration("1.5h", "X")).toBe(5_400_000);
    expect(parseDuration("10 minutes", "X")).toBe(600_000);
    expect(parseDuration("1d", "X")).toBe(86_400_000);
  });

  it("refuses a number without a unit, negative durations and text", () => {
    for (const text of ["15", "-5s", "soon", ""]) {
      expect(() => parseDuration(text, "WEBHOOK_TIMEOUT")).toThrow(ConfigError);
    }
    expect(() => parseDuration("15", "WEBHOOK_TIMEOUT")).toThrow(/WEBHOOK_TIMEOUT: "15" is not a duration/);
  });

  it("applies to every duration setting", () => {
    const config = loadConfig({ WEBHOOK_TIMEOUT: "2s", WEBHOOK_LEASE: "1m", WEBHOOK_RETRY_SCHEDULE: "0s,1.5s,2m" });
    expect(config.webhookTimeoutMs).toBe(2_000);
    expect(config.webhookLeaseMs).toBe(60_000);
    expect(config.webhookRetryScheduleMs).toEqual([0, 1_500, 120_000]);
    expect(loadConfig({ RETENTION_PRUNE_INTERVAL: "0" }).retentionPruneIntervalMs).toBe(0);
  });
});

describe("read admission's turn target", () => {
  it("is 10 ms on SQLite and 7 ms on PostgreSQL unless READ_TURN_TARGET says otherwise", () => {
    expect(loadConfig({ DATABASE_URL: "file:./data/x.db" }).readTurnTargetMs).toBe(10);
    expect(loadConfig({ DATABASE_URL: "postgresql://db/reftrail" }).readTurnTargetMs).toBe(7);
    expect(loadConfig({ DATABASE_URL: "postgres://db/reftrail" }).readTurnTargetMs).toBe(7);
    expect(loadConfig({ DATABASE_URL: "postgresql://db/reftrail", READ_TURN_TARGET: "12ms" }).readTurnTargetMs).toBe(
      12,
    );
  });
});

describe("the broker CA file", () => {
  it("is read at start, and a file that cannot be read or holds no certificate is refused by name", () => {
    const directory = mkdtempSync(join(tmpdir(), "reftrail-config-"));
    try {
      const pem = join(directory, "ca.pem");
      writeFileSync(pem, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
      expect(loadConfig({ WEBHOOK_BROKER_CA_FILE: pem }).webhookBrokerCaCertificates).toContain("BEGIN CERTIFICATE");
      expect(loadConfig({}).webhookBrokerCaCertificates).toBeNull();
      const notPem = join(directory, "key.txt");
      writeFileSync(notPem, "not a certificate\n");
      expect(() => loadConfig({ WEBHOOK_BROKER_CA_FILE: notPem })).toThrow(/WEBHOOK_BROKER_CA_FILE: .* no PEM/);
      expect(() => loadConfig({ WEBHOOK_BROKER_CA_FILE: join(directory, "missing.pem") })).toThrow(
        /WEBHOOK_BROKER_CA_FILE: .* cannot be read/,
      );
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});
