import type { ApolloServerPlugin, BaseContext } from "@apollo/server";

/** What a GraphQL request's context offers the admission: a wait for its turn, over HTTP only. */
export interface AdmissionContext extends BaseContext {
  /** Resolves once the request's read may run (admission-hooks.ts); absent where reads are not held. */
  readonly holdRead?: () => Promise<void>;
}

/**
 * Holds a GraphQL query until the read admission lets it run, and lets a mutation run at once. The kind is the
 * parsed operation's, the one the request's `operationName` selects, as Apollo resolved it: a comment or a string
 * that says `mutation` changes nothing, and a persisted query sent as its hash alone is what its stored document
 * is. The wait is the last step before execution (`executionDidStart` runs right before it), after Apollo has
 * parsed and validated the document (or found it in its document store) and every `didResolveOperation` check
 * has passed: a document refused there never takes a place, and the one parse is Apollo's (docs/decisions.md,
 * "Read admission", 2026-12).
 */
export function readAdmissionPlugin<Context extends AdmissionContext>(): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        async executionDidStart({ operation, contextValue }) {
          if (operation.operation === "query") await contextValue.holdRead?.();
        },
      };
    },
  };
}
