/**
 * A signal that aborts when `parent` does, or after `ms` with a `TimeoutError` reason, as
 * `AbortSignal.any([parent, AbortSignal.timeout(ms)])` would. That composition is not safe on Node 20: the timeout
 * signal is held only weakly (by its own timer and by the composite), so a garbage collection before the deadline
 * drops it and the composite never aborts (nodejs/node#57736; a `sleep 60` build step outlived a 1.5 s deadline
 * that way). Here the timer holds the controller, so the deadline fires whatever the collector does.
 * `clear()` stops the timer and lets go of `parent`; call it when the guarded work is over.
 */
export function withDeadline(ms: number, parent?: AbortSignal): { signal: AbortSignal; clear: () => void } {
  const controller = new AbortController();
  const onParent = () => {
    clear();
    controller.abort(parent?.reason);
  };
  const timer = setTimeout(() => {
    clear();
    controller.abort(new DOMException(`the deadline of ${ms} ms passed`, 'TimeoutError'));
  }, ms);
  // The deadline alone does not keep a process alive; while it runs, the timer still holds the controller.
  timer.unref();
  const clear = () => {
    clearTimeout(timer);
    parent?.removeEventListener('abort', onParent);
  };
  if (parent?.aborted) onParent();
  else parent?.addEventListener('abort', onParent, { once: true });
  return { signal: controller.signal, clear };
}
