// The Pod Security Standards checks that agentplane's pods meet (the `restricted` profile, version latest), as the
// API server's PodSecurity admission applies them to a pod template: each violation as the server words it.
type Json = Record<string, any>;

const BASELINE_CAPS = new Set([
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

/** Violations of `baseline` by a pod spec (with its template annotations). */
export function baselineViolations(spec: Json, annotations: Json = {}): string[] {
  const out: string[] = [];
  const containers: Json[] = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC) out.push('host namespaces');
  if ((spec.volumes ?? []).some((v: Json) => v.hostPath)) out.push('hostPath volumes');
  if (spec.securityContext?.seccompProfile?.type === 'Unconfined')
    out.push('seccompProfile (pod must not be Unconfined)');
  for (const c of containers) {
    const sc = c.securityContext ?? {};
    if (sc.privileged) out.push(`privileged (container "${c.name}")`);
    if (sc.seccompProfile?.type === 'Unconfined')
      out.push(`seccompProfile (container "${c.name}" must not be Unconfined)`);
    if (sc.appArmorProfile?.type === 'Unconfined')
      out.push(`appArmorProfile (container "${c.name}" must not be Unconfined)`);
    for (const cap of sc.capabilities?.add ?? [])
      if (!BASELINE_CAPS.has(cap)) out.push(`non-default capabilities (container "${c.name}" adds ${cap})`);
  }
  for (const [k, v] of Object.entries(annotations))
    if (k.startsWith('container.apparmor.security.beta.kubernetes.io/') && v === 'unconfined')
      out.push(`forbidden AppArmor profile (${k}="${v}")`);
  return out;
}

/** Violations of `restricted` (which includes `baseline`). */
export function restrictedViolations(spec: Json, annotations: Json = {}): string[] {
  const out = baselineViolations(spec, annotations);
  const pod = spec.securityContext ?? {};
  const containers: Json[] = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
  for (const c of containers) {
    const sc = c.securityContext ?? {};
    if (sc.allowPrivilegeEscalation !== false) out.push(`allowPrivilegeEscalation != false (container "${c.name}")`);
    if (!(sc.capabilities?.drop ?? []).includes('ALL'))
      out.push(`unrestricted capabilities (container "${c.name}" must drop ALL)`);
    if ((sc.capabilities?.add ?? []).some((x: string) => x !== 'NET_BIND_SERVICE'))
      out.push(`unrestricted capabilities (container "${c.name}" adds more than NET_BIND_SERVICE)`);
    if ((sc.runAsNonRoot ?? pod.runAsNonRoot) !== true) out.push(`runAsNonRoot != true (container "${c.name}")`);
    if ((sc.runAsUser ?? pod.runAsUser) === 0) out.push(`runAsUser=0 (container "${c.name}")`);
    const seccomp = (sc.seccompProfile ?? pod.seccompProfile)?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost')
      out.push(`seccompProfile (container "${c.name}" must set RuntimeDefault or Localhost)`);
  }
  const allowed = new Set([
    'configMap',
    'csi',
    'downwardAPI',
    'emptyDir',
    'ephemeral',
    'persistentVolumeClaim',
    'projected',
    'secret',
    'name',
  ]);
  for (const v of spec.volumes ?? [])
    for (const k of Object.keys(v)) if (!allowed.has(k)) out.push(`restricted volume types (${v.name}: ${k})`);
  return out;
}
