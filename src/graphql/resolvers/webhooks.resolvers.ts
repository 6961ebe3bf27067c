import { maskedDestination } from "../../domain/webhooks/webhook-destination.ts";
import { tagFilterStateOf, type WebhookDeliveryWithAttempts } from "../../domain/webhooks/webhook-models.ts";
import type { Resolvers, WebhookDestinationInput } from "../__generated__/resolvers-types.ts";
import { withoutNulls } from "../arguments.ts";
import { changeOf } from "../context.ts";
import { underArgument, type InputLocator } from "../../pipeline/errors/graphql-errors.ts";
import { forwardPage, toConnection } from "../pagination.ts";

/** Webhook endpoints and deliveries: reads, the delivery log, and the endpoint mutations. */
export const webhookResolvers: Resolvers = {
  Query: {
    webhookEndpoints: async (_, args, { caller, services }) =>
      toConnection(await services.webhooks.listEndpoints(caller.organizationId, forwardPage(args))),
    webhookEndpoint: (_, { id }, { caller, services }) => services.webhooks.getEndpoint(caller.organizationId, id),
    webhookDelivery: (_, { id }, { caller, services }) =>
      services.webhooks.getDelivery(caller.organizationId, null, id),
  },
  WebhookEndpoint: {
    tagIds: (endpoint) => (endpoint.tagIds === null ? null : [...endpoint.tagIds]),
    tagFilterState: (endpoint) => tagFilterStateOf(endpoint),
    destination: (endpoint) => endpoint.destination && maskedDestination(endpoint.destination),
    heldBack: (endpoint, _, { caller, services }) =>
      services.webhookRecovery.heldBack(caller.organizationId, endpoint.id),
    replay: (endpoint, _, { caller, services }) =>
      services.webhookRecovery.replayOf(caller.organizationId, endpoint.id),
    // One service call per endpoint, like Reference.events: each endpoint's deliveries are their own listing.
    deliveries: async (endpoint, args, { caller, services }) =>
      toConnection(
        await services.webhooks.listDeliveries(caller.organizationId, endpoint.id, {
          ...withoutNulls(args.filter),
          ...forwardPage(args),
        }),
      ),
  },
  WebhookDestination: {
    __resolveType: (destination) => ("exchange" in destination ? "RabbitMqDestination" : "NatsDestination"),
  },
  WebhookDelivery: {
    body: (delivery) => JSON.parse(delivery.body) as Record<string, unknown>,
    // A delivery read on its own comes with its attempts; in a list, one loader batch reads them all.
    attempts: (delivery, _, { loaders }) =>
      "attempts" in delivery
        ? [...(delivery as WebhookDeliveryWithAttempts).attempts]
        : loaders.webhookAttemptsByDeliveryId.load(delivery.id),
  },
  Mutation: {
    createWebhookEndpoint: async (_, { input }, { caller, services, requestId }) => {
      const { endpoint, secret } = await services.webhooks.createEndpoint(
        caller.organizationId,
        {
          ...input,
          url: input.url ?? undefined,
          destination: destinationOf(input.destination),
        },
        changeOf({ caller, requestId }),
      );
      return { webhookEndpoint: endpoint, secret };
    },
    updateWebhookEndpoint: async (
      _,
      { input: { id, url, destination, ...changes } },
      { caller, services, requestId },
    ) => ({
      // An explicit null means "every type" for eventTypes, "every reference" for tagIds and "none" for
      // description; a null url, destination or enabled changes nothing.
      webhookEndpoint: await services.webhooks.updateEndpoint(
        caller.organizationId,
        id,
        {
          ...changes,
          url: url ?? undefined,
          destination: destinationOf(destination),
        },
        changeOf({ caller, requestId }),
      ),
    }),
    deleteWebhookEndpoint: async (_, { input }, { caller, services, requestId }) => {
      await services.webhooks.deleteEndpoint(caller.organizationId, input.id, changeOf({ caller, requestId }));
      return { deletedWebhookEndpointId: input.id.toLowerCase() };
    },
    rotateWebhookEndpointSecret: async (_, { input }, { caller, services, requestId }) => {
      const { endpoint, secret } = await services.webhooks.rotateSecret(
        caller.organizationId,
        input.id,
        changeOf({ caller, requestId }),
      );
      return { webhookEndpoint: endpoint, secret };
    },
    sendTestWebhook: async (_, { input }, { caller, services }) => ({
      delivery: await services.webhooks.sendTestEvent(caller.organizationId, input.endpointId),
    }),
    resendWebhookDelivery: async (_, { input }, { caller, services }) => ({
      delivery: await services.webhooks.resendDelivery(caller.organizationId, null, input.deliveryId),
    }),
    recoverWebhookDeliveries: (_, { endpointId, ...window }, { caller, services, requestId }) =>
      services.webhookRecovery.recover(
        caller.organizationId,
        endpointId,
        {
          ...window,
          dryRun: window.dryRun ?? false,
        },
        changeOf({ caller, requestId }),
      ),
    replayWebhookEvents: (_, { endpointId, ...window }, { caller, services, requestId }) =>
      services.webhookRecovery.replay(
        caller.organizationId,
        endpointId,
        { ...window, dryRun: window.dryRun ?? false },
        changeOf({ caller, requestId }),
      ),
  },
};

/** The domain's `{ kind, ...fields }` from the @oneOf input (`{ rabbitmq: {...} }` or `{ nats: {...} }`). */
function destinationOf(input: WebhookDestinationInput | null | undefined): Record<string, unknown> | undefined {
  if (!input) return undefined;
  if (input.rabbitmq) return { kind: "rabbitmq", ...withoutNulls(input.rabbitmq) };
  if (input.nats) return { kind: "nats", ...withoutNulls(input.nats) };
  return undefined;
}

/** The domain's `destination.<field>` is `input.destination.<kind>.<field>` in the @oneOf input. */
const endpointInput: InputLocator = (path, args) => {
  const [head, field, ...rest] = path;
  if (head !== "destination" || field === undefined) return ["input", ...path];
  const destination = (args.input as { destination?: Record<string, unknown> } | undefined)?.destination ?? {};
  return ["input", "destination", ...Object.keys(destination).slice(0, 1), field, ...rest];
};

/** Where each webhook field's service input sits in its arguments (for `extensions.field`). */
export const webhookInputLocators: Readonly<Record<string, InputLocator>> = {
  "WebhookEndpoint.deliveries": underArgument(["filter"], { cursor: ["after"] }),
  "Mutation.createWebhookEndpoint": endpointInput,
  "Mutation.updateWebhookEndpoint": endpointInput,
};
