# agentplane: one image for every subcommand (control-plane, operator, agent-server, dev, api-key), and the base
# image that generated agent Dockerfiles build FROM (they copy a project into /deps/app and run `agent-server`).
# Our code runs from its bundle (dist/cli, built in the `cli` stage); the agents' TypeScript loads through tsx.
# Node 22 LTS (maintained until April 2027; package.json engines: ^20.19.0 || ^22.13.0 || >=24). The node:22 tags
# follow the newest 22.x, which satisfies every dependency's engines.
ARG NODE_VERSION=22

# Production dependencies, with the toolchain native modules (better-sqlite3) may need when no prebuilt binary fits.
FROM node:${NODE_VERSION}-slim AS deps
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# Our code bundled (scripts/build-cli.mjs; esbuild is a production dependency). bin/agentplane.mjs runs dist/cli only
# while no source it was built from is newer than the build (dist/cli/manifest.json), else the sources through tsx:
# an agent server from the sources holds about 30-40 MB more, and about 75 MB more while an executor thread is alive
# (tsx's loader and the compiled modules, in the main thread and again in each executor thread;
# bench/results/idle-rss.md). The final stage takes src/ from this stage
# too, so the files' times are the ones the build saw whatever the layer cache reuses.
FROM deps AS cli
COPY tsconfig.json ./
COPY src ./src
COPY scripts/build-cli.mjs ./scripts/
RUN node scripts/build-cli.mjs

# The web console bundle: built with the dev dependencies (vite, react), only dist/console goes into the image.
FROM node:${NODE_VERSION}-slim AS console
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY console ./console
RUN node console/build.mjs

FROM node:${NODE_VERSION}-slim
# git: the build Job's clone init container runs this image. tini: signals and zombie reaping as PID 1.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production npm_config_update_notifier=false
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY --from=cli /app/src ./src
COPY --from=cli /app/dist/cli ./dist/cli
COPY crds ./crds
COPY --from=console /app/dist/console ./dist/console
# bin/agentplane.mjs's own test of the bundle (every input no newer than the build): a copy that changed the files'
# times would make every server run the sources without a word, so the build fails instead.
RUN node -e "const m = require('./dist/cli/manifest.json'); const fs = require('fs'); \
  const newer = m.inputs.filter((f) => fs.statSync(f).mtimeMs > m.builtFrom); \
  if (newer.length) { console.error('dist/cli is older than ' + newer[0]); process.exit(1); }"
RUN ln -s /app/bin/agentplane.mjs /usr/local/bin/agentplane \
 && chmod +x /app/bin/agentplane.mjs \
 && mkdir -p /deps/app \
 && chown node:node /deps/app
# The image's `node` user (uid 1000), matching runAsUser in the chart and the build Job.
USER node
EXPOSE 8000 8080
ENTRYPOINT ["/usr/bin/tini", "--", "agentplane"]
CMD ["--help"]
