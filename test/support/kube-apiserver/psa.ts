// Pod Security admission as the real server runs it: the namespace's `pod-security.kubernetes.io/enforce` label
// (baseline or restricted) refuses Pods that violate the level (403), and only warns for workload objects whose
// pod template would (the pods their controllers create are refused later); the `warn` label warns for both.
// The checks and their wording follow the Pod Security Standards' "latest" version.

type Json = Record<string, any>;
export type Level = 'privileged' | 'baseline' | 'restricted';

const BASELINE_CAPABILITIES = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
]);
const RESTRICTED_VOLUMES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);
const SELINUX_TYPES = new Set(['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']);

/** Where each kind keeps the pod spec PSA checks (workloads: their template). */
export function podSpecOf(kind: string, obj: Json): Json | undefined {
  if (kind === 'Pod') return obj.spec;
  if (kind === 'CronJob') return obj.spec?.jobTemplate?.spec?.template?.spec;
  if (['Deployment', 'ReplicaSet', 'StatefulSet', 'DaemonSet', 'Job', 'ReplicationController'].includes(kind))
    return obj.spec?.template?.spec;
  if (kind === 'PodTemplate') return obj.template?.spec;
  return undefined;
}

const quote = (names: string[]) => names.map((n) => `"${n}"`).join(', ');
const containers = (names: string[]) => `${names.length > 1 ? 'containers' : 'container'} ${quote(names)}`;

/** The pod template's (or pod's) annotations: AppArmor profiles may still be set there. */
function podAnnotationsOf(kind: string, obj: Json): Json {
  if (kind === 'Pod') return obj.metadata?.annotations ?? {};
  if (kind === 'CronJob') return obj.spec?.jobTemplate?.spec?.template?.metadata?.annotations ?? {};
  if (kind === 'PodTemplate') return obj.template?.metadata?.annotations ?? {};
  return obj.spec?.template?.metadata?.annotations ?? {};
}

/** AppArmor profiles other than the runtime's default or a localhost one (fields and the older annotations). */
function appArmorViolations(spec: Json, all: Json[], annotations: Json): string[] {
  const out: string[] = [];
  const allowed = (v: string) => v === '' || v === 'runtime/default' || v.startsWith('localhost/');
  const bad = Object.entries(annotations).filter(
    ([k, v]) => k.startsWith('container.apparmor.security.beta.kubernetes.io/') && !allowed(String(v)),
  );
  if (bad.length)
    out.push(
      `forbidden AppArmor ${bad.length > 1 ? 'profiles' : 'profile'} (${bad.map(([k, v]) => `${k}="${String(v)}"`).join(', ')})`,
    );
  const unconfined = all.filter((c) => c.securityContext?.appArmorProfile?.type === 'Unconfined');
  const pod = spec.securityContext?.appArmorProfile?.type === 'Unconfined';
  if (pod || unconfined.length)
    out.push(
      `forbidden AppArmor profile (${pod ? 'pod' : containers(unconfined.map((c) => String(c.name)))} must not set securityContext.appArmorProfile.type to "Unconfined")`,
    );
  return out;
}

/**
 * The violations of `level` in a pod spec, each "check (detail)" as the server words it; `annotations` are the
 * pod's (or template's), where AppArmor profiles may be set the older way.
 */
export function violations(spec: Json, level: Level, annotations: Json = {}): string[] {
  if (level === 'privileged' || !spec) return [];
  const out: string[] = [];
  const all: Json[] = [...(spec.initContainers ?? []), ...(spec.containers ?? []), ...(spec.ephemeralContainers ?? [])];
  const pod = spec.securityContext ?? {};
  const sc = (c: Json) => c.securityContext ?? {};
  const names = (pred: (c: Json) => boolean) => all.filter(pred).map((c) => String(c.name));

  const hostNs = ['hostNetwork', 'hostPID', 'hostIPC'].filter((f) => spec[f] === true);
  if (hostNs.length) out.push(`host namespaces (${hostNs.map((f) => `${f}=true`).join(', ')})`);
  out.push(...appArmorViolations(spec, all, annotations));
  const privileged = names((c) => sc(c).privileged === true);
  if (privileged.length)
    out.push(`privileged (${containers(privileged)} must not set securityContext.privileged=true)`);
  const badCaps = all.flatMap((c) =>
    ((sc(c).capabilities?.add ?? []) as string[]).filter((a) => !BASELINE_CAPABILITIES.has(a)),
  );
  const badCapContainers = names((c) =>
    ((sc(c).capabilities?.add ?? []) as string[]).some((a) => !BASELINE_CAPABILITIES.has(a)),
  );
  if (badCapContainers.length)
    out.push(
      `non-default capabilities (${containers(badCapContainers)} must not include ${quote([...new Set(badCaps)])} in securityContext.capabilities.add)`,
    );
  const hostPath = ((spec.volumes ?? []) as Json[]).filter((v) => v.hostPath).map((v) => String(v.name));
  if (hostPath.length) out.push(`hostPath volumes (${hostPath.length > 1 ? 'volumes' : 'volume'} ${quote(hostPath)})`);
  const hostPorts = all.flatMap((c) =>
    ((c.ports ?? []) as Json[]).filter((p) => p.hostPort).map((p) => ({ c: String(c.name), p: p.hostPort })),
  );
  if (hostPorts.length)
    out.push(
      `hostPort (${containers([...new Set(hostPorts.map((h) => h.c))])} ${hostPorts.length > 1 ? 'uses hostPorts' : 'uses hostPort'} ${hostPorts.map((h) => h.p).join(', ')})`,
    );
  const seLinux = [pod, ...all.map(sc)].some(
    (s) =>
      s.seLinuxOptions &&
      (!SELINUX_TYPES.has(s.seLinuxOptions.type ?? '') || s.seLinuxOptions.user || s.seLinuxOptions.role),
  );
  if (seLinux) out.push('seLinuxOptions (pod or containers must not set forbidden securityContext.seLinuxOptions)');
  const unmasked = names((c) => sc(c).procMount !== undefined && sc(c).procMount !== 'Default');
  if (unmasked.length)
    out.push(`procMount (${containers(unmasked)} must not set securityContext.procMount to "Unmasked")`);
  const unconfined = names((c) => sc(c).seccompProfile?.type === 'Unconfined');
  if (pod.seccompProfile?.type === 'Unconfined' || unconfined.length)
    out.push(
      `seccompProfile (${pod.seccompProfile?.type === 'Unconfined' ? 'pod' : containers(unconfined)} must not set securityContext.seccompProfile.type to "Unconfined")`,
    );
  const sysctls = ((pod.sysctls ?? []) as Json[]).map((s) => String(s.name)).filter((n) => !SAFE_SYSCTLS.has(n));
  if (sysctls.length) out.push(`forbidden sysctls (${sysctls.join(', ')})`);
  if (level === 'baseline') return out;

  const restrictedVolumes = ((spec.volumes ?? []) as Json[])
    .map((v) => ({ name: String(v.name), type: Object.keys(v).find((k) => k !== 'name') ?? '' }))
    .filter((v) => v.type && !RESTRICTED_VOLUMES.has(v.type));
  if (restrictedVolumes.length)
    out.push(
      `restricted volume types (${restrictedVolumes.length > 1 ? 'volumes' : 'volume'} ${quote(restrictedVolumes.map((v) => v.name))} ${restrictedVolumes.length > 1 ? 'use' : 'uses'} restricted volume type${restrictedVolumes.length > 1 ? 's' : ''} ${quote([...new Set(restrictedVolumes.map((v) => v.type))])})`,
    );
  const escalation = names((c) => sc(c).allowPrivilegeEscalation !== false);
  if (escalation.length)
    out.push(
      `allowPrivilegeEscalation != false (${containers(escalation)} must set securityContext.allowPrivilegeEscalation=false)`,
    );
  const noDrop = names((c) => !((sc(c).capabilities?.drop ?? []) as string[]).includes('ALL'));
  const extraAdd = names((c) => ((sc(c).capabilities?.add ?? []) as string[]).some((a) => a !== 'NET_BIND_SERVICE'));
  if (noDrop.length || extraAdd.length) {
    const parts = [
      ...(noDrop.length ? [`${containers(noDrop)} must set securityContext.capabilities.drop=["ALL"]`] : []),
      ...(extraAdd.length
        ? [
            `${containers(extraAdd)} must not include ${quote([...new Set(all.flatMap((c) => ((sc(c).capabilities?.add ?? []) as string[]).filter((a) => a !== 'NET_BIND_SERVICE')))])} in securityContext.capabilities.add`,
          ]
        : []),
    ];
    out.push(`unrestricted capabilities (${parts.join('; ')})`);
  }
  const nonRootUnset = names((c) =>
    sc(c).runAsNonRoot === undefined ? pod.runAsNonRoot !== true : sc(c).runAsNonRoot !== true,
  );
  if (pod.runAsNonRoot === false || nonRootUnset.length) {
    out.push(
      pod.runAsNonRoot !== true && nonRootUnset.length === all.length
        ? `runAsNonRoot != true (pod or ${containers(nonRootUnset)} must set securityContext.runAsNonRoot=true)`
        : `runAsNonRoot != true (${containers(nonRootUnset)} must not set securityContext.runAsNonRoot=false)`,
    );
  }
  const root = names((c) => sc(c).runAsUser === 0);
  if (pod.runAsUser === 0 || root.length)
    out.push(`runAsUser=0 (${pod.runAsUser === 0 ? 'pod' : containers(root)} must not set runAsUser=0)`);
  const okSeccomp = (s: Json | undefined) => s?.type === 'RuntimeDefault' || s?.type === 'Localhost';
  const noSeccomp = names((c) =>
    sc(c).seccompProfile ? !okSeccomp(sc(c).seccompProfile) : !okSeccomp(pod.seccompProfile),
  );
  if (noSeccomp.length && !unconfined.length && pod.seccompProfile?.type !== 'Unconfined')
    out.push(
      `seccompProfile (${okSeccomp(pod.seccompProfile) ? containers(noSeccomp) : `pod or ${containers(noSeccomp)}`} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`,
    );
  return out;
}

/** The levels a namespace's labels ask for. */
export function namespaceLevels(labels: Json | undefined): {
  enforce: Level;
  enforceVersion: string;
  warn: Level;
  warnVersion: string;
} {
  const level = (mode: string): Level => {
    const v = labels?.[`pod-security.kubernetes.io/${mode}`];
    return v === 'baseline' || v === 'restricted' ? v : 'privileged';
  };
  return {
    enforce: level('enforce'),
    enforceVersion: labels?.['pod-security.kubernetes.io/enforce-version'] ?? 'latest',
    warn: level('warn'),
    warnVersion: labels?.['pod-security.kubernetes.io/warn-version'] ?? 'latest',
  };
}

export type PsaDecision = { forbidden?: string; warnings: string[] };

/** What PSA says about writing `obj` (of `kind`) into a namespace with `labels`. */
export function evaluate(kind: string, obj: Json, labels: Json | undefined): PsaDecision {
  const spec = podSpecOf(kind, obj);
  if (!spec) return { warnings: [] };
  const annotations = podAnnotationsOf(kind, obj);
  const ns = namespaceLevels(labels);
  const warnings: string[] = [];
  const enforced = violations(spec, ns.enforce, annotations);
  const text = (verb: string, level: Level, version: string, v: string[]) =>
    `${verb} PodSecurity "${level}:${version}": ${v.join(', ')}`;
  if (enforced.length) {
    if (kind === 'Pod') return { forbidden: text('violates', ns.enforce, ns.enforceVersion, enforced), warnings };
    warnings.push(text('would violate', ns.enforce, ns.enforceVersion, enforced));
  }
  const warned = violations(spec, ns.warn, annotations);
  if (warned.length && !(ns.warn === ns.enforce && enforced.length))
    warnings.push(text('would violate', ns.warn, ns.warnVersion, warned));
  return { warnings };
}
