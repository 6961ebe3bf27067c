# Not built in CI (no container engine there): keep it plain. `docker build -t reftrail .`
# Stage 1: install everything, generate the Prisma clients, compile to dist/, then drop development packages.
FROM node:20-slim AS build
WORKDIR /app
# better-sqlite3 compiles its native addon when no prebuilt binary fits.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# The project's own postinstall needs the sources (copied below); dependencies' scripts run where needed.
RUN npm ci --ignore-scripts --no-audit --no-fund && npm rebuild better-sqlite3
COPY . .
RUN npm run generate:prisma && npm run build && npm prune --omit=dev --ignore-scripts

# Stage 2: the compiled server and its production dependencies, run as the unprivileged `node` user.
FROM node:20-slim
ENV NODE_ENV=production \
  HOST=0.0.0.0 \
  PORT=4000 \
  DATABASE_URL=file:/data/reftrail.db
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
# Read at run time, relative to dist/: the SQL migrations and the GraphQL schema.
COPY --from=build /app/prisma/migrations ./prisma/migrations
COPY --from=build /app/schema.graphql ./
RUN mkdir /data && chown node:node /data
USER node
# The SQLite database (the default DATABASE_URL); unused with PostgreSQL.
VOLUME /data
EXPOSE 4000
# node itself is PID 1 (no npm, no shell): it receives SIGTERM and shuts down gracefully (at most 25 s).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/main.js"]
