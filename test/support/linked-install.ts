// The install command of a test whose subject is not the install.
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/lib/package-root.ts';

/**
 * source_config.install_command (BuildSpec.installCommand) for a test whose subject is not the install:
 * node_modules becomes a link to agentplane's own packages (the versions examples/agent asks for, visible read-only in
 * the sandbox) instead of an npm ci, which writes ~70 MB per new deployment and costs ~5 s of CPU. The real npm ci,
 * its failures and the install cache stay pinned by test/e2e/dev.test.ts, source-fix.test.ts, platform-app.test.ts,
 * langgraph-cli.test.ts (an uploaded tarball), test/operator/runtimes/local/local-runtime.test.ts,
 * local-isolation.test.ts, local-sandbox-*.test.ts, test/e2e/client-commands.test.ts and test/e2e/console.test.ts: one
 * for each thing it proves there.
 */
export const LINKED_INSTALL = `ln -s '${join(PACKAGE_ROOT, 'node_modules')}' node_modules`;
