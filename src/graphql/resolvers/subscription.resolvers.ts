import type { LiveSubscriptions, StreamMessage } from "../../live/live-subscriptions.ts";
import type { DeliveryActivityService } from "../../domain/webhooks/delivery-activity.ts";
import type { WebhookDeliveryWithAttempts } from "../../domain/webhooks/webhook-models.ts";
import type { Resolvers } from "../__generated__/resolvers-types.ts";
import type { GraphqlContext } from "../context.ts";
import { AT_ARGUMENTS, toGraphqlError, underArgument } from "../../pipeline/errors/graphql-errors.ts";
import { GraphQLError } from "graphql";

/** The context of an operation over graphql-ws: the same as over HTTP, plus the live subscriptions. */
export interface SubscriptionContext extends GraphqlContext {
  readonly lifecycleStreams: LiveSubscriptions;
  readonly deliveryActivity?: DeliveryActivityService;
}

function lifecycleStreamsOf(context: GraphqlContext): LiveSubscriptions {
  const streams = (context as Partial<SubscriptionContext>).lifecycleStreams;
  if (!streams) {
    // Apollo executes a subscription sent over HTTP like a query; say where subscriptions live instead.
    throw new GraphQLError("Subscriptions run over graphql-ws: open a WebSocket (ws:// or wss://) to this same URL", {
      extensions: { code: "BAD_REQUEST", http: { status: 400 } },
    });
  }
  return streams;
}

function deliveryActivityOf(context: GraphqlContext): DeliveryActivityService {
  lifecycleStreamsOf(context);
  const activity = (context as Partial<SubscriptionContext>).deliveryActivity;
  if (!activity) throw new Error("Subscription.webhookDeliveryAttempts without a delivery activity service");
  return activity;
}

/** Where the stream's input sits in `Subscription.lifecycleEvents`' arguments (the domain's `type` is `types`). */
const LIFECYCLE_EVENTS_ARGUMENTS = underArgument([], { cursor: ["after"], type: ["types"] });

/** `Subscription.lifecycleEvents`: one live stream of the caller's organization per operation. */
export const subscriptionResolvers: Resolvers = {
  Subscription: {
    lifecycleEvents: {
      subscribe: async (_root, args, context) => {
        const streams = lifecycleStreamsOf(context);
        try {
          return await streams.open(context.caller.organizationId, args);
        } catch (error) {
          // Subscribe functions are not wrapped by schema.ts: map domain errors to located GraphQL errors here.
          throw toGraphqlError(error, LIFECYCLE_EVENTS_ARGUMENTS, args);
        }
      },
      resolve: (message: StreamMessage | undefined, _args: unknown, context: GraphqlContext) => {
        // Over HTTP, Apollo calls `resolve` without `subscribe` (and without a message).
        if (!message) lifecycleStreamsOf(context);
        // One operation serves every event of a long-lived subscription: start each event with empty loaders,
        // so `reference` shows the reference as it is now and the cache does not grow with the stream.
        context.loaders.clearAll();
        if (!message) throw new Error("Subscription.lifecycleEvents resolved without a message");
        return { cursor: message.cursor, node: message.event };
      },
    },
    webhookDeliveryAttempts: {
      subscribe: async (_root, args, context) => {
        const activity = deliveryActivityOf(context);
        try {
          return await activity.open(context.caller.organizationId, args.endpointId ?? null);
        } catch (error) {
          throw toGraphqlError(error, AT_ARGUMENTS, args);
        }
      },
      resolve: (delivery: WebhookDeliveryWithAttempts | undefined, _args: unknown, context: GraphqlContext) => {
        if (!delivery) {
          deliveryActivityOf(context);
          throw new Error("Subscription.webhookDeliveryAttempts resolved without a message");
        }
        context.loaders.clearAll();
        return delivery;
      },
    },
  },
};
