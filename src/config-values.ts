import ms, { type StringValue } from "ms";

/*
 * How one setting's text becomes a value (src/config.ts reads the environment and calls these): each refuses what
 * it cannot read with a ConfigError that names the variable and what it expected.
 */

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/**
 * Parses `250ms`, `5s`, `5m`, `2h`, `1d` (anything `ms` reads: also `1.5h`, `10 minutes`, `1w`). A number without a
 * unit is refused although `ms` would read it as milliseconds: `WEBHOOK_TIMEOUT=15` almost surely meant seconds.
 */
export function parseDuration(text: string, name: string): number {
  const trimmed = text.trim();
  // ms throws on an empty string and returns undefined for text it cannot read.
  const value = trimmed === "" || /^\d+(\.\d+)?$/.test(trimmed) ? undefined : ms(trimmed as StringValue);
  if (value === undefined || !Number.isFinite(value) || value < 0) {
    throw new ConfigError(`${name}: "${text}" is not a duration such as 500ms, 5s, 5m, 2h or 1d`);
  }
  return Math.round(value);
}

/** A number above 0 (a fraction allowed), or `fallback` when unset. */
export function parsePositiveNumber(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new ConfigError(`${name}: "${raw}" is not a number above 0`);
  return value;
}

export function parseInteger(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new ConfigError(`${name}: "${raw}" is not an integer >= ${min}`);
  return value;
}

export function parseSwitch(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === "") return fallback;
  if (["on", "true", "1"].includes(raw)) return true;
  if (["off", "false", "0"].includes(raw)) return false;
  throw new ConfigError(`${name}: "${env[name]}" is not on or off`);
}
