import { changeOf } from "../context.ts";
import type { Resolvers } from "../__generated__/resolvers-types.ts";
import { underArgument, type InputLocator } from "../../pipeline/errors/graphql-errors.ts";
import { forwardPage, toConnection } from "../pagination.ts";

/** The registry of trusted documents (src/domain/documents/): reads and registration. */
export const trustedDocumentResolvers: Resolvers = {
  Query: {
    trustedDocuments: async (_, args, { caller, services }) =>
      toConnection(await services.trustedDocuments.listDocuments(caller.organizationId, forwardPage(args))),
    trustedDocument: (_, { documentId }, { caller, services }) =>
      services.trustedDocuments.getDocument(caller.organizationId, documentId),
  },
  TrustedDocument: {
    operationNames: (document) => [...document.operationNames],
  },
  Mutation: {
    registerTrustedDocuments: async (_, { input }, { caller, services, requestId }) => {
      const { documents, registered } = await services.trustedDocuments.registerDocuments(
        caller,
        input.manifest,
        changeOf({ caller, requestId }),
      );
      return { documents: [...documents], registered };
    },
  },
};

/** Where each field's service input sits in its arguments (for `extensions.field`). */
export const trustedDocumentInputLocators: Readonly<Record<string, InputLocator>> = {
  // The manifest's entries are named by their keys, under the argument.
  "Mutation.registerTrustedDocuments": underArgument(["input", "manifest"]),
};
