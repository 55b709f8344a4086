# leasebeat image: a build stage compiles TypeScript, the runtime stage carries production dependencies only.

FROM node:20-slim AS build
WORKDIR /app
# Dependencies first, so that editing the sources reuses the cached `npm ci` layer.
COPY package.json package-lock.json ./
# No scripts: `prepare` builds dist/ for a checkout, and the sources are not here yet (built below).
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
# `jobs/` may be absent from a fresh checkout (git keeps no empty folder); the runtime stage copies it from here.
RUN npm run build && mkdir -p jobs

FROM node:20-slim AS runtime
WORKDIR /app
ENV NODE_ENV=production LEASEBEAT_HTTP_HOST=0.0.0.0
COPY package.json package-lock.json ./
# tsx is a production dependency: job files may be TypeScript and are loaded at run time.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# Job files import the library as `../src/index.js`, which type-checks in the repository. Here the compiled
# library answers that path, and since Node resolves the link to dist/, jobs and the CLI share each module.
RUN ln -s dist src
COPY --from=build /app/jobs ./jobs
COPY bin ./bin
# The files stay owned by root and read-only to the process. UID 1000 is the base image's `node` user; it
# is numeric so that Kubernetes' runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 8080
# Node's global fetch, so the image needs no curl. Kubernetes ignores this and uses the probes instead.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.LEASEBEAT_HTTP_PORT || '8080') + '/livez', { signal: AbortSignal.timeout(2000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Exec form, node as PID 1: SIGTERM goes straight to leasebeat's own handler (no npm, no shell in between).
# No `--import tsx`: the job loader registers tsx itself once it meets a `.ts` job file (src/scheduling/loader.ts),
# so an image whose jobs are all `.js` never pays for its module hooks.
CMD ["node", "dist/cli/main.js", "start"]
