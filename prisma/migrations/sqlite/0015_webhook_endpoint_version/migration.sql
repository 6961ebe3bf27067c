-- An endpoint's version: raised by every change of the row that decides where and how its requests go (a PATCH,
-- a secret rotation, a disable by the worker). The delivery worker compares it, just before a request starts,
-- with the version its claim read (docs/decisions.md, "Endpoint changes stop the requests claimed ahead").
ALTER TABLE "webhook_endpoints" ADD COLUMN "version" INTEGER NOT NULL DEFAULT 0;
