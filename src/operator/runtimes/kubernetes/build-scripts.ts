// The shell (and one node) scripts of the build Job's containers (build-job.ts): getting the source by clone or by
// tarball fetch, the checks and the Dockerfile both ways share, the BuildKit build and the push. Each fails with one
// line in the container's termination message, which the revision's status shows.
import { JS_ONLY_MESSAGE } from '../../../lib/graph-language.ts';
import { GIT_AUTH_SCRIPT } from '../../../git/clone-auth.ts';

/** Where the git credentials Secret is mounted, in the clone container only. */
export const GIT_CREDENTIALS_DIR = '/var/run/agentplane/git';

/**
 * Where the agentplane image keeps the graph load check (its Dockerfile copies src/ to /app): the clone step runs it
 * when its image is ours (the default); another clone image skips the check.
 */
export const IMAGE_GRAPH_CHECK = '/app/src/operator/runtimes/local/graph-check.mjs';

// What both ways of getting the source share, in /workspace/src with $sha set: the graph config must be there and
// inside the tree, the Dockerfile is written, and the graph load check runs.
const PREPARE_SCRIPT = `if [ ! -f "$GRAPH_CONFIG" ]; then fail "graph config \\"$GRAPH_CONFIG\\" not found at $sha"; fi
# Nothing outside the checkout is read as the graph config (a symlink to the mounted credentials would show part of
# them in the error for invalid JSON).
case "$(readlink -f "$GRAPH_CONFIG" || true)" in
  "$(pwd -P)"/*) ;;
  *) fail "graph config \\"$GRAPH_CONFIG\\" resolves outside the repository (a symlink?)" ;;
esac
if command -v node >/dev/null 2>&1; then
  node --input-type=commonjs -e "$DOCKERFILE_LINES_SCRIPT" /workspace/Dockerfile
elif grep -Eq '\\.py(:[^"]*)?"' "$GRAPH_CONFIG"; then
  fail "langgraph.json names a Python graph (.py): ${JS_ONLY_MESSAGE}"
elif grep -q '"dockerfile_lines"' "$GRAPH_CONFIG"; then
  fail "langgraph.json has dockerfile_lines: the clone image needs node to add them (--git-image)"
else
  printf '%s' "$DOCKERFILE" > /workspace/Dockerfile
fi
# The graph load check (syntax errors, imports of files that do not exist), before an image is built for nothing.
check="\${GRAPH_CHECK_SCRIPT:-${IMAGE_GRAPH_CHECK}}"
if [ -f "$check" ] && command -v node >/dev/null 2>&1; then
  report="\${TMPDIR:-/tmp}/agentplane-graph-check"
  rm -f "$report"
  if node "$check" "$GRAPH_CONFIG" /workspace/src "$report"; then
    if [ -s "$report" ]; then
      cat "$report" >&2
      n=$(grep -c . "$report")
      first=$(head -n 1 "$report")
      if [ "$n" -gt 1 ]; then first="$first (and $((n - 1)) more in the build log)"; fi
      fail "$first"
    fi
    echo "graphs checked: they parse and their imports resolve"
  else
    echo "the graph load check could not run; building without it" >&2
  fi
fi
printf '%s' "$sha" > /workspace/commit
`;

const FAIL_FN = `fail() { echo "$1" >&2; if [ -e /dev/termination-log ]; then printf '%s' "$1" > /dev/termination-log; fi; exit 1; }
`;

// Tries the ref as a branch, a tag, then anything git understands (a commit), like the local runtime. A failure the
// script finds is its termination message (one line, shown in the revision's status); git's own errors reach it
// through the container's FallbackToLogsOnError.
export const CLONE_SCRIPT = `set -eu
${FAIL_FN}${GIT_AUTH_SCRIPT}git clone --quiet --no-checkout -- "$REPO_URL" /workspace/src
cd /workspace/src
sha=""
for c in "refs/remotes/origin/$REPO_REF" "refs/tags/$REPO_REF" "$REPO_REF"; do
  if sha=$(git rev-parse --verify --quiet "$c^{commit}"); then break; fi
  sha=""
done
if [ -z "$sha" ]; then fail "repo_ref \\"$REPO_REF\\" is not a branch, tag or commit of $REPO_URL"; fi
git checkout --quiet --detach "$sha"
echo "resolved $REPO_REF to $sha"
rm -rf .git
${PREPARE_SCRIPT}`;

// Downloads with node (the clone image is ours by default; curl or wget otherwise), hashes what arrived and refuses
// any other bytes than the revision's, then extracts them as the build's unprivileged user (the archive was checked
// for paths, links and entry types leading out of the tree when it was uploaded).
export const FETCH_JS = `const fs=require('fs'),h=require('crypto').createHash('sha256');
const token=fs.readFileSync(process.env.SOURCE_TOKEN_FILE,'utf8').trim();
fetch(process.env.SOURCE_URL,{headers:{authorization:'Bearer '+token}}).then(async r=>{
if(!r.ok){const t=(await r.text()).slice(0,300);console.error('HTTP '+r.status+': '+t);process.exit(2)}
const out=fs.createWriteStream(process.argv[1]);
for await(const c of r.body){h.update(c);if(!out.write(c))await new Promise(d=>out.once('drain',d))}
await new Promise(d=>out.end(d));fs.writeFileSync(process.argv[1]+'.sha256',h.digest('hex'))
}).catch(e=>{console.error(String(e&&e.message||e));process.exit(2)})`;

export const FETCH_SCRIPT = `set -eu
${FAIL_FN}mkdir -p /workspace/src
cd /workspace/src
archive=/workspace/source.tar.gz
if command -v node >/dev/null 2>&1; then
  node -e "$FETCH_JS" "$archive" || fail "the source tarball could not be downloaded from the control plane ($SOURCE_URL)"
  got=$(cat "$archive.sha256")
else
  auth="Authorization: Bearer $(cat "$SOURCE_TOKEN_FILE")"
  if command -v curl >/dev/null 2>&1; then curl -fsS -H "$auth" -o "$archive" "$SOURCE_URL"
  else wget -q --header "$auth" -O "$archive" "$SOURCE_URL"; fi || fail "the source tarball could not be downloaded from the control plane ($SOURCE_URL)"
  got=$(sha256sum "$archive" | cut -d' ' -f1)
fi
if [ "$got" != "$SOURCE_SHA256" ]; then fail "the downloaded source tarball has sha256 $got, not the revision's $SOURCE_SHA256"; fi
tar -xzf "$archive" -C /workspace/src || fail "the source tarball could not be extracted"
rm -f "$archive" "$archive.sha256"
# Modes come from the archive: the build (the same user) must read every file all the same.
chmod -R u+rwX /workspace/src
sha="$SOURCE_SHA256"
echo "extracted source tarball sha256:$sha"
${PREPARE_SCRIPT}`;

export const BUILD_SCRIPT = `set -eu
buildctl-daemonless.sh build \\
  --frontend dockerfile.v0 \\
  --local context=/workspace/src \\
  --local dockerfile=/workspace \\
  --output "type=oci,dest=/image/layout,tar=false,name=$IMAGE"
echo "built $IMAGE"
`;

// --preserve-digests: the digest pushed is the one BuildKit computed, or the copy fails; --all: an index (say with
// attestations) is pushed whole rather than narrowed to one platform, which would change its digest.
export const PUSH_SCRIPT = `set -eu
skopeo copy --quiet --all --preserve-digests --digestfile /tmp/digest \\
  \${REGISTRY_AUTH_FILE:+--authfile "$REGISTRY_AUTH_FILE"} \\
  oci:/image/layout "docker://$IMAGE"
digest=$(cat /tmp/digest)
case "$digest" in sha256:*) ;; *) echo "skopeo reported no image digest" >&2; exit 1 ;; esac
printf '{"commit":"%s","digest":"%s"}' "$(cat /workspace/commit)" "$digest" > /dev/termination-log
echo "pushed $IMAGE@$digest"
`;
