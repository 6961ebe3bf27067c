import { validationFailed } from "../shared/errors.ts";

/** What the tracking side reports after trying to extract a reference's details. */
export type ExtractionOutcome =
  | { readonly status: "succeeded" }
  | { readonly status: "failed"; readonly error: { readonly code: string; readonly message: string } };

/**
 * Validates an extraction outcome from any surface: `{ status: "succeeded" }` or
 * `{ status: "failed", error: { code, message } }` with non-empty strings. Paths are relative to the
 * outcome: `["status"]`, `["error"]`, `["error", "code"]`.
 * @throws VALIDATION_FAILED listing every problem.
 */
export function parseExtractionOutcome(input: unknown): ExtractionOutcome {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    throw validationFailed([{ path: [], code: "INVALID_TYPE", message: "an extraction outcome must be an object" }]);
  }
  const raw = input as { readonly status?: unknown; readonly error?: unknown };
  if (raw.status === "succeeded") {
    if (raw.error !== undefined && raw.error !== null) {
      throw validationFailed([
        { path: ["error"], code: "NOT_ALLOWED", message: "error is only allowed when status is failed" },
      ]);
    }
    return { status: "succeeded" };
  }
  if (raw.status !== "failed") {
    throw validationFailed([{ path: ["status"], code: "INVALID_ENUM", message: "status must be succeeded or failed" }]);
  }
  const error = raw.error;
  if (error === null || typeof error !== "object" || Array.isArray(error)) {
    throw validationFailed([
      { path: ["error"], code: "REQUIRED", message: "error { code, message } is required when status is failed" },
    ]);
  }
  const { code, message } = error as Record<string, unknown>;
  const issues = (
    [
      ["code", code],
      ["message", message],
    ] as const
  ).flatMap(([key, value]) =>
    typeof value === "string" && value.trim() !== ""
      ? []
      : [{ path: ["error", key], code: "REQUIRED", message: `error.${key} must be a non-empty string` }],
  );
  if (issues.length > 0) throw validationFailed(issues);
  return { status: "failed", error: { code: code as string, message: message as string } };
}
