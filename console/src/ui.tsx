// Small shared pieces: status badges, times, copy button, confirmation dialog, a JSON tree.
import { useEffect, useRef, useState, type ReactNode } from 'react';
import type { Health, StatusSummary } from './api.ts';

const TONE: Record<string, string> = {
  DEPLOYED: 'ok',
  READY: 'ok',
  BUILDING: 'busy',
  DEPLOYING: 'busy',
  QUEUED: 'busy',
  CREATING: 'busy',
  AWAITING_BUILD: 'busy',
  AWAITING_DEPLOY: 'busy',
  AWAITING_DATABASE: 'busy',
  AWAITING_DELETE: 'warn',
  CREATE_FAILED: 'bad',
  BUILD_FAILED: 'bad',
  DEPLOY_FAILED: 'bad',
  INTERRUPTED: 'warn',
  SKIPPED: 'muted',
  UNUSED: 'muted',
  UNKNOWN: 'muted',
};

export function Status({ value }: { value: string }) {
  return <span className={`badge ${TONE[value] ?? 'muted'}`}>{value}</span>;
}

const STATE_TONE = { serving: 'ok', building: 'busy', failed: 'bad', deleting: 'warn' } as const;

/** One phrase for a deployment's status summary: "Serving #3", "Building #4", "Failed: BUILD_FAILED", "Deleting". */
export function stateLabel(s: StatusSummary): string {
  const n = (x: number | null) => (x === null ? '' : ` #${x}`);
  // Asleep under the idle policy: it serves all the same, its first request starts it.
  if (s.state === 'serving' && s.reason === 'Sleeping') return `Sleeping${n(s.serving_revision_number)}`;
  if (s.state === 'serving') return `Serving${n(s.serving_revision_number)}`;
  if (s.state === 'building') return `Building${n(s.target_revision_number)}`;
  if (s.state === 'failed') return `Failed${s.reason ? `: ${s.reason}` : ''}`;
  return 'Deleting';
}

/** The deployment's badge (what a person needs first), its message as the title; while building or failed, a
 * second, outlined badge says what still serves. */
export function StateBadge({ summary }: { summary: StatusSummary }) {
  const stillServing = summary.state !== 'serving' && summary.serving_revision_number !== null;
  return (
    <>
      <span className={`badge ${STATE_TONE[summary.state]}`} title={summary.message ?? ''} data-state={summary.state}>
        {stateLabel(summary)}
      </span>
      {stillServing && <span className="badge ok outline">serving #{summary.serving_revision_number}</span>}
    </>
  );
}

/** "Serving" or "Not serving: <reason>", with the message as its title; nothing before the operator looked. */
export function HealthBadge({ health }: { health: Health | undefined }) {
  if (!health || health.ready === null) return null;
  if (health.ready && health.reason === 'Sleeping')
    return (
      <span className="badge ok outline" title={health.message ?? ''} data-health-reason="Sleeping">
        Sleeping
      </span>
    );
  if (health.ready) return <span className="badge ok">Serving</span>;
  return (
    <span className="badge bad" title={health.message ?? ''} data-health-reason={health.reason ?? ''}>
      Not serving{health.reason ? `: ${health.reason}` : ''}
    </span>
  );
}

export function time(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      className="small"
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(text);
        } catch {
          // Clipboard API needs a secure context; fall back to a hidden textarea.
          const t = document.createElement('textarea');
          t.value = text;
          document.body.appendChild(t);
          t.select();
          document.execCommand('copy');
          t.remove();
        }
        setDone(true);
        setTimeout(() => setDone(false), 1500);
      }}
    >
      {done ? 'Copied' : label}
    </button>
  );
}

/** A modal built on <dialog>: focus is trapped and Escape closes it, both by the browser. */
export function Confirm({
  title,
  children,
  confirmLabel,
  danger,
  canConfirm = true,
  onConfirm,
  onClose,
}: {
  title: string;
  children: ReactNode;
  confirmLabel: string;
  danger?: boolean;
  canConfirm?: boolean;
  onConfirm: () => void;
  onClose: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
  }, []);
  return (
    <dialog ref={ref} onClose={onClose} aria-label={title}>
      <h2>{title}</h2>
      {children}
      <div className="actions">
        <button type="button" className="secondary" onClick={onClose}>
          Cancel
        </button>
        <button type="button" className={danger ? 'danger' : ''} disabled={!canConfirm} onClick={onConfirm}>
          {confirmLabel}
        </button>
      </div>
    </dialog>
  );
}

/** JSON as a tree of <details>: objects and arrays fold, the first levels start open. */
export function JsonTree({ value, name, depth = 0 }: { value: unknown; name?: string; depth?: number }) {
  const label = name === undefined ? null : <span className="key">{name}: </span>;
  if (value === null || typeof value !== 'object') {
    return (
      <div className="leaf">
        {label}
        <span className={`v-${value === null ? 'null' : typeof value}`}>{JSON.stringify(value)}</span>
      </div>
    );
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
  const summary = Array.isArray(value)
    ? `[${entries.length}]`
    : `{${entries.length}}${preview(value as Record<string, unknown>)}`;
  return (
    <details open={depth < 2} className="node">
      <summary>
        {label}
        <span className="muted">{summary}</span>
      </summary>
      {entries.map(([k, v]) => (
        <JsonTree key={k} name={k} value={v} depth={depth + 1} />
      ))}
    </details>
  );
}

/** A hint on a folded object: a message's type and the start of its text. */
function preview(o: Record<string, unknown>): string {
  const kind = typeof o.type === 'string' ? o.type : typeof o.role === 'string' ? o.role : '';
  const text = typeof o.content === 'string' ? o.content : '';
  if (!kind && !text) return '';
  return ` ${kind}${text ? ` "${text.length > 48 ? `${text.slice(0, 48)}…` : text}"` : ''}`;
}

export function ErrorBanner({ error }: { error: string | null }) {
  return error ? (
    <p role="alert" className="error">
      {error}
    </p>
  ) : null;
}

/** Calls `fn` every `ms` while `active`, and once at once. */
export function usePoll(fn: () => Promise<void> | void, ms: number, active: boolean, deps: unknown[]) {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    if (!active) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout>;
    const tick = async () => {
      try {
        await saved.current();
      } finally {
        if (!stopped) timer = setTimeout(tick, ms);
      }
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [active, ms, ...deps]);
}
