import { parseDateTime } from "../shared/date-time.ts";
import { validationFailed, type FieldIssue } from "../shared/errors.ts";
import type { TimeWindow } from "./webhook-recovery-repository.ts";

/* The window `[since, until)` of a recover or replay call, as either surface gives it, checked. */

/** Raw window input from either surface: `since` required, `until` optional (default: now). */
export interface RecoveryWindowInput {
  readonly since?: unknown;
  readonly until?: unknown;
  /** Count only: nothing is sent, and the count is returned even above the limit. */
  readonly dryRun?: boolean;
}

/** `[since, until)`, until defaulting to now. @throws VALIDATION_FAILED */
export function windowOf(input: RecoveryWindowInput, now: Date, retentionCutoff: Date): TimeWindow {
  const issues: FieldIssue[] = [];
  const since = dateOf(input.since);
  if (input.since === undefined || input.since === null)
    issues.push({ path: ["since"], code: "REQUIRED", message: "{since} is required" });
  else if (!since)
    issues.push({ path: ["since"], code: "INVALID_DATE_TIME", message: "{since} must be an ISO 8601 date-time" });
  const untilGiven = input.until !== undefined && input.until !== null;
  const until = untilGiven ? dateOf(input.until) : now;
  if (!until)
    issues.push({ path: ["until"], code: "INVALID_DATE_TIME", message: "{until} must be an ISO 8601 date-time" });
  if (since && until) {
    if (since < retentionCutoff)
      issues.push({
        path: ["since"],
        code: "BEFORE_RETENTION",
        message: `{since} is older than the log's retention: the oldest allowed is ${retentionCutoff.toISOString()}`,
      });
    else if (since > until)
      issues.push({
        path: ["since"],
        code: "AFTER_UNTIL",
        message: untilGiven ? "{since} must not be after {until}" : "{since} must not be in the future",
      });
  }
  if (issues.length > 0 || !since || !until) throw validationFailed(issues);
  return { since, until };
}

/** A date-time from REST (text) or GraphQL (already a Date); null when malformed. */
function dateOf(value: unknown): Date | null {
  return value instanceof Date ? value : parseDateTime(value);
}
