/* doctor/rules_loop: the rules about the host side of the training loop — where a step's time goes
 * before the accelerator gets work. A step that waits for data is split by cause: loading that is
 * CPU-bound (input_bound, with loader_workers when more processes would fit), loading that waits on
 * storage (io_bound) or on latency with the CPU idle (input_latency). A step that does not wait for
 * data yet leaves the GPU (or, on a CPU-only run, the CPU) idle is host_code_bound; time lost in
 * regular gaps between steps is periodic_stall. Thresholds and models: docs/diagnosis.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "doctor/doctor_int.h"

/* ---- shared figures ---- */

/* 1 saturated, 0 not, -1 unknown (usable cores or the job's CPU not measured). */
static int saturated(const struct dr_run *d) {
  double u = dr_usable_cores(d);
  if (!isfinite(u) || !isfinite(d->job_cores))
    return -1;
  return d->job_cores >= DR_SATURATED * u;
}

/* A CPU quota that binds with no room left in it for one more loading process (the quota less the
 * job's CPU below what one loading process uses): more workers would only share the same cores. */
static int quota_full(const struct dr_run *d, double lcpu_lo) {
  return isfinite(d->quota) && d->quota <= dr_usable_cores(d) + 1e-9 && isfinite(d->job_cores) &&
         d->quota - d->job_cores < (isfinite(lcpu_lo) && lcpu_lo > 0.1 ? lcpu_lo : 0.1);
}

/* Do the host's tasks wait for a CPU most of the time (PSI cpu some)? Then a process's low CPU says
 * it was runnable, not that it waited on something else — unless the job's own processes hardly
 * waited (the others waited for it: a job above them in cgroup weight). */
static int cpu_contended(const struct dr_run *d) {
  return d->psi_cpu.n && d->psi_cpu.mean >= DR_CPU_CONTENDED && !(dr_job_runq(d) <= DR_UNCONTENDED_RUNQ);
}

/* The first used GPU with util readings (the no-steps paths read this one, not GPU 0), or NULL. */
static const struct dr_gpu *used_gpu(const struct dr_run *d) {
  for (int i = 0; i < d->ngpus; i++)
    if (d->gpus[i].used && d->gpus[i].util.n)
      return &d->gpus[i];
  return NULL;
}

static double main_cpu(const struct dr_run *d) {
  return d->main_idx >= 0 ? d->procs[d->main_idx].cpu : d->job_cores;
}

/* Cores one loading process keeps busy while it loads, as a range [lo, hi] (both NAN unknown; equal
 * when measured). With workers, their own CPU. Without, the training process's CPU m apportioned to
 * its data phase: m = ds x loader + (1 - ds) x c, where c, the compute phase's cores, is not measured
 * separately — it lies between 0 and the fewer of the usable cores and m / (1 - ds). So the loader
 * lies between (m - (1 - ds) x c_max) / ds and m / ds, and never above the cores the job may use. */
static void loader_cpu(const struct dr_run *d, double *lo, double *hi) {
  *lo = *hi = NAN;
  if (dr_current_workers(d) > 0 && d->nworkers > 0) {
    *lo = *hi = d->worker_cpu;
    return;
  }
  double m = main_cpu(d), ds = d->data_share;
  if (!isfinite(m) || !(ds > 0))
    return;
  double cap = isfinite(dr_usable_cores(d)) ? dr_usable_cores(d) : d->cores;
  double c_max = ds < 1 ? m / (1 - ds) : 0;
  if (isfinite(cap))
    c_max = fmin(c_max, cap);
  *hi = m / ds;
  if (isfinite(cap))
    *hi = fmin(*hi, cap);
  *lo = fmin(*hi, fmax(0, (m - (1 - ds) * c_max) / ds));
}

/* Whether the loading is the workers' (the job has them), not the training process's. */
static int workers_load(const struct dr_run *d) {
  return dr_current_workers(d) > 0 && d->nworkers > 0;
}

/* The share of the time the loading processes (the workers, or the training process without them)
 * waited for a CPU while runnable, their mean: NAN when not measured (no schedstat). A loader that
 * uses little CPU because it waits for one is starved, not waiting on latency. */
static double loader_runq(const struct dr_run *d) {
  int workers = workers_load(d);
  double sum = 0;
  int n = 0;
  for (size_t i = 0; i < d->nprocs; i++) {
    const struct dr_proc *p = &d->procs[i];
    int loads = workers ? p->role == DOCTOR_ROLE_WORKER : (int)i == d->main_idx;
    if (loads && isfinite(p->runq))
      sum += p->runq, n++;
  }
  return n ? sum / n : NAN;
}

/* How much of the loading the loaders spent waiting for a CPU, 0..1 (NAN unknown): workers only load,
 * so their wait share is it; the training process loading without workers also computes, and while
 * computing on a busy host it may wait for a CPU too — only its wait beyond the rest of the step (the
 * part the data wait must hold, at least) counts, as a share of the data wait. A process that sleeps
 * for its data and waits for a CPU only while it computes is not a starved loader. */
static double loading_runq(const struct dr_run *d) {
  double runq = loader_runq(d);
  if (workers_load(d))
    return runq;
  double ds = d->data_share;
  if (!isfinite(runq) || !(ds > 0))
    return NAN;
  return fmin(1, fmax(0, runq - (1 - ds)) / ds);
}

/* "0.80 cores" or "0.75-1.25 cores" into buf. */
static const char *cores_text(char *buf, size_t n, double lo, double hi) {
  if (!isfinite(lo) || !isfinite(hi))
    dr_printf(buf, n, "— cores");
  else if (hi - lo < 0.005)
    dr_printf(buf, n, "%.2f cores", hi);
  else
    dr_printf(buf, n, "%.2f-%.2f cores", lo, hi);
  return buf;
}

/* Loading that runs inside the training process, in threads: no worker processes, no num_workers
 * reported, many threads, and about one core busy — Python threads share one core under the GIL. */
static int loads_in_threads(const struct dr_run *d) {
  if (d->nworkers || isfinite(d->num_workers) || d->main_idx < 0)
    return 0;
  const struct dr_proc *p = &d->procs[d->main_idx];
  return p->threads >= DR_GIL_THREADS && p->cpu >= DR_GIL_CORES_LO && p->cpu <= DR_GIL_CORES_HI;
}

/* The loading processes' share of time in D state (uninterruptible, nearly always storage). */
static double dstate_share(const struct dr_run *d) {
  if (!d->tree_dstate.n)
    return NAN;
  int loaders = dr_current_workers(d) > 0 ? dr_current_workers(d) : 1;
  return fmin(1, d->tree_dstate.mean / loaders);
}

static double compute_h2d_s(const struct dr_run *d) {
  double h = dr_fin(d->h2d_mean, 0);
  double c = isfinite(d->compute_mean) ? d->compute_mean : d->step_mean - dr_fin(d->data_mean, 0) - h;
  return fmax(0, c) + h;
}

double dr_workers_step_s(const struct dr_run *d, double load_s, int w) {
  double s = compute_h2d_s(d);
  if (w > 0)
    s = fmax(s, load_s / w);
  else
    s += load_s;
  /* The CPU the job spends per step must still fit on the cores it can use. */
  double u = dr_usable_cores(d);
  if (isfinite(u) && isfinite(d->job_cores) && isfinite(d->step_mean))
    s = fmax(s, d->job_cores * d->step_mean / u);
  return s;
}

/* Bytes one more loader process would take: a worker's RSS, else the training process's. */
static double bytes_per_worker(const struct dr_run *d) {
  if (isfinite(d->worker_rss))
    return d->worker_rss;
  if (d->main_idx >= 0 && isfinite(d->procs[d->main_idx].rss))
    return d->procs[d->main_idx].rss;
  return NAN;
}

/* Free memory for new processes: the host's available memory and the cgroup's room, the smaller. */
static double memory_room(const struct dr_run *d) {
  double room = d->mem_avail.n ? d->mem_avail.min : NAN;
  if (d->cg_mem_limit.n && d->cg_mem_used.n && d->cg_mem_limit.min > 0) {
    double cg = d->cg_mem_limit.min - d->cg_mem_used.max;
    room = isfinite(room) ? fmin(room, cg) : cg;
  }
  return room;
}

/* ---- input-bound and its causes ---- */

/* The loader_workers advice: at most as many processes as cores and memory allow (wmax, of which
 * mem_cap by memory), recommended the fewest within DR_WORKERS_NEAR_BEST of the best step time (with
 * headroom), and what the model promises for them. */
struct workers_advice {
  int wmax, mem_cap, rec;
  double per, room; /* bytes per worker, memory room (NAN unknown) */
  double s_new, speedup;
};

/* Returns 1 with a filled in when more workers would help, else 0. */
static int advise_workers(const struct dr_run *d, int w0, double load_s, struct workers_advice *a) {
  double cores = d->cores;
  /* The model needs the cores the job may use: without them it would promise workers for cores that
   * are not there. */
  if (!isfinite(cores) || !isfinite(dr_usable_cores(d)) || !isfinite(d->step_mean) || !isfinite(d->job_cores))
    return 0;
  /* Cores whose tasks wait for a CPU nearly all the time are full: more workers only queue (the job's
   * CPU there is what it got, not what it needs, so the CPU term cannot say so). */
  if (cpu_contended(d))
    return 0;
  a->wmax = cores >= DR_MAX_WORKERS ? DR_MAX_WORKERS : (int)floor(cores);
  a->per = bytes_per_worker(d), a->room = memory_room(d);
  a->mem_cap = DR_MAX_WORKERS;
  if (isfinite(a->per) && a->per > 0 && isfinite(a->room)) {
    double extra = floor(DR_WORKER_MEM_SAFETY * fmax(a->room, 0) / a->per);
    a->mem_cap = extra >= DR_MAX_WORKERS ? DR_MAX_WORKERS : w0 + (int)extra;
  }
  if (a->mem_cap < a->wmax)
    a->wmax = a->mem_cap;
  if (a->wmax <= w0)
    return 0;
  /* The advice keeps headroom: the fewest workers that would still keep up if loading took a
   * quarter longer (batches vary); the estimate itself uses the measured load time. */
  double slack = load_s * DR_WORKER_HEADROOM, best = INFINITY;
  for (int w = w0 + 1; w <= a->wmax; w++)
    best = fmin(best, dr_workers_step_s(d, slack, w));
  a->rec = a->wmax;
  for (int w = w0 + 1; w <= a->wmax; w++)
    if (dr_workers_step_s(d, slack, w) <= best * DR_WORKERS_NEAR_BEST) {
      a->rec = w;
      break;
    }
  a->s_new = dr_workers_step_s(d, load_s, a->rec);
  a->speedup = d->step_mean / a->s_new;
  return a->speedup >= DR_WORKERS_MIN_SPEEDUP;
}

static void workers_evidence(struct store_finding *f, const struct dr_run *d, int w0, double load_s, double lcpu_lo,
                             double lcpu_hi, int threads, const struct workers_advice *a) {
  char est[256];
  struct dr_json ej;
  dr_json_begin(&ej, est, sizeof est);
  for (int w = w0 + 1, k = 0; w <= a->wmax && k < DR_WORKERS_LISTED; w++, k++) {
    char key[16];
    snprintf(key, sizeof key, "%d", w);
    dr_json_num(&ej, key, d->step_mean / dr_workers_step_s(d, load_s, w));
  }
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_int(&j, "num_workers", w0);
  dr_json_int(&j, "recommended_workers", a->rec);
  dr_json_num(&j, "step_s", d->step_mean);
  dr_json_num(&j, "data_wait_s", d->data_mean);
  dr_json_num(&j, "compute_s", compute_h2d_s(d));
  dr_json_num(&j, "load_s_per_batch", load_s);
  dr_json_num(&j, "loader_cpu_cores_min", lcpu_lo);
  dr_json_num(&j, "loader_cpu_cores_max", lcpu_hi);
  dr_json_num(&j, "job_cpu_cores", d->job_cores);
  dr_json_num(&j, "usable_cores", dr_usable_cores(d));
  dr_json_num(&j, "cpuset_cores", d->cpuset);
  dr_json_num(&j, "other_work_cores", d->others_cores);
  if (threads)
    dr_json_num(&j, "main_process_threads", d->procs[d->main_idx].threads);
  dr_json_num(&j, "memory_room_bytes", a->room);
  dr_json_num(&j, "bytes_per_worker", a->per);
  dr_json_num(&j, "predicted_step_s", a->s_new);
  dr_json_raw(&j, "speedup_by_workers", est);
  dr_json_str(&j, "model", "step = max(compute+h2d, load/workers, job CPU per step / usable cores)");
}

static void add_loader_workers(struct dr_run *d, struct dr_findings *fs, int w0, double load_s, double lcpu_lo,
                               double lcpu_hi) {
  struct workers_advice a;
  if (quota_full(d, lcpu_lo) || !advise_workers(d, w0, load_s, &a))
    return;
  int rec = a.rec;
  double s_new = a.s_new;
  /* The estimate is the step model's (stalls included), the same figure the final pass gives. */
  struct dr_step m;
  struct dr_change c;
  dr_step_build(d, fs, &m);
  dr_change_none(&c);
  c.workers = rec;
  double speedup = dr_step_speedup(&m, &c);
  if (speedup < DR_WORKERS_MIN_SPEEDUP)
    return;
  struct store_finding *f = dr_add(fs, d, "loader_workers", 1 - 1 / speedup, speedup);
  if (!f)
    return;
  dr_set_change(fs, f, DR_CH_WORKERS, DR_TERM_DATA, rec, DR_WORKERS_MIN_SPEEDUP);
  int threads = loads_in_threads(d);
  if (isfinite(d->num_workers))
    dr_printf(f->title, sizeof f->title, "Cheap win: raise num_workers from %d to %d (about %.1fx faster)", w0, rec,
              speedup);
  else if (w0 > 0)
    dr_printf(f->title, sizeof f->title, "Cheap win: load in %d processes instead of %d (about %.1fx faster)", rec, w0,
              speedup);
  else
    dr_printf(f->title, sizeof f->title,
              "Cheap win: load in %d worker process%s, not in the training process%s (about %.1fx faster)", rec,
              rec == 1 ? "" : "es", threads ? "'s threads" : "", speedup);
  workers_evidence(f, d, w0, load_s, lcpu_lo, lcpu_hi, threads, &a);
  int pf = d->persistent_workers == 1 ? 1 : 0;
  char lc[48], bs[32], mem[96], gil[200] = "";
  if (isfinite(d->batch_size))
    dr_printf(bs, sizeof bs, "%.0f", d->batch_size);
  else
    dr_printf(bs, sizeof bs, "B"); /* the job did not say its batch size */
  if (!isfinite(a.per) || !isfinite(a.room))
    dr_printf(mem, sizeof mem, "memory for more workers not measured (check that %d more fit)", rec - w0);
  else
    dr_printf(mem, sizeof mem, "memory for %s more workers", a.mem_cap >= DR_MAX_WORKERS ? "many" : "enough");
  if (threads)
    dr_printf(gil, sizeof gil,
              " The loading runs inside the training process: %.0f threads keep about %.1f cores busy — Python "
              "threads share one core under the GIL, so more threads do not help; processes do.",
              d->procs[d->main_idx].threads, d->procs[d->main_idx].cpu);
  dr_printf(f->fix, sizeof f->fix,
            "Loading is CPU-bound (%s per loading process) and the host has room: %.1f usable cores, "
            "%s.%s Load in %d worker process%s (processes, not threads: Python "
            "transforms hold the GIL)%s. Model: step = max(compute %.0f ms, load %.0f ms / workers, the job's "
            "CPU per step / usable cores) = %.0f ms, down from %.0f ms.\n"
            "PyTorch:\n"
            "  loader = torch.utils.data.DataLoader(ds, batch_size=%s, shuffle=True,\n"
            "      num_workers=%d, persistent_workers=True, prefetch_factor=2, pin_memory=True)\n"
            "Keras / tf.data:\n"
            "  ds = ds.map(augment, num_parallel_calls=%d).prefetch(tf.data.AUTOTUNE)\n"
            "  # or a keras.utils.PyDataset / Sequence: model.fit(seq, workers=%d, use_multiprocessing=True)",
            cores_text(lc, sizeof lc, lcpu_lo, lcpu_hi), dr_usable_cores(d), mem, gil, rec, rec == 1 ? "" : "es",
            pf ? "" : ", kept alive between epochs", compute_h2d_s(d) * 1e3, load_s * 1e3, s_new * 1e3,
            d->step_mean * 1e3, bs, rec, rec, rec);
}

/* Whether more loader processes would help, for the input-bound fix. A quota that binds is named:
 * on a 64-core host, "the cores it can" would read as 64. */
static const char *more_workers_text(const struct dr_run *d, const struct dr_findings *fs, char *buf, size_t n) {
  int full = saturated(d) == 1 || quota_full(d, -1);
  if (dr_has(fs, "loader_workers"))
    dr_printf(buf, n, " (see loader_workers)");
  else if (isfinite(d->quota) && d->quota <= dr_usable_cores(d) + 1e-9)
    dr_printf(buf, n, " (%s %.1f cores its cgroup's CPU quota allows)",
              full ? "here they are not: the job already uses the" : "the workers model found none worth adding in the",
              d->quota);
  else if (saturated(d) != 1)
    dr_printf(buf, n, " (the workers model found none worth adding here)");
  else
    dr_printf(buf, n, " (here they are not: the job already uses the cores it can)");
  return buf;
}

/* What producing a batch still costs once its samples are cached or predecoded, as a share of the
 * data wait: the collate the loader does per batch (it stays whatever the samples cost), which the
 * client times where it runs in the training process (the loader_collate_s param, num_workers=0).
 * 0 where it is not measured (worker processes collate out of the client's sight). The per-sample
 * work a cache keeps (a crop, a flip) is not measured either, and counts as nothing. */
static double batch_residual(const struct dr_run *d) {
  if (dr_current_workers(d) > 0 || !(d->collate_s >= 0) || !(d->data_mean > 0))
    return 0;
  return fmin(1, d->collate_s / d->data_mean);
}

/* The model input_bound's estimate is, in words, and the residual it keeps (rest > 0: the collate). */
static void input_bound_model(struct dr_json *j, const struct dr_run *d, double rest) {
  dr_json_num(j, "collate_s", rest > 0 ? d->collate_s : NAN);
  if (rest > 0)
    dr_json_str(j, "model",
                "the data term shrinks to what a batch still costs from cached samples, the loader's collate "
                "(measured; per-sample work a cache keeps is not): speed-up = T / (T - data wait + collate)");
  else
    dr_json_str(j, "model",
                "the data term goes (what a batch still costs from cached samples not measured, counted as "
                "nothing): speed-up = T / (T - data wait)");
}

/* The fix's first words: the step's wait for its batch, and what the estimate keeps of it (rest: the
 * residual share batch_residual gave). */
static void input_bound_wait(const struct dr_run *d, double rest, char *buf, size_t n) {
  if (isfinite(d->data_mean) && isfinite(d->step_mean) && rest > 0)
    dr_printf(buf, n,
              "The step waits %.0f ms of %.0f ms for its batch (%.1f ms of it the collate, which stays once "
              "the samples are cached; the estimate keeps it)",
              d->data_mean * 1e3, d->step_mean * 1e3, d->collate_s * 1e3);
  else if (isfinite(d->data_mean) && isfinite(d->step_mean))
    dr_printf(buf, n,
              "The step waits %.0f ms of %.0f ms for its batch (the estimate counts what a batch still costs "
              "once cached as nothing: %s)",
              d->data_mean * 1e3, d->step_mean * 1e3,
              dr_current_workers(d) > 0 ? "worker processes collate unseen" : "the collate was not timed");
  else
    dr_printf(buf, n, "The GPU waits while the job's CPU is saturated (no step timings)");
}

static void add_input_bound(struct dr_run *d, struct dr_findings *fs, double lcpu_lo, double lcpu_hi, int inferred) {
  const struct dr_gpu *g = used_gpu(d);
  /* The cost is what was measured: the data wait's share of the step (the run view's data_share, the
   * figure the report shows beside it), or without step timings the GPU's idle share; the speed-up is
   * the step model's (dr_evaluate_changes, step_model.c). */
  double share = inferred ? 1 - g->util.mean / 100 : d->data_share;
  struct store_finding *f = dr_add(fs, d, "input_bound", share, 1);
  if (!f)
    return;
  /* With steps: the data term shrinks to what a batch still costs from cached samples (the measured
   * collate, batch_residual; the loading's CPU with it). Inferred: the GPU's idle time, which the
   * model holds as host idle when there are no step timings. */
  double rest = inferred ? 0 : batch_residual(d);
  if (inferred)
    dr_set_change(fs, f, DR_CH_REMOVE, DR_TERM_HOST, share, 1);
  else
    dr_set_change(fs, f, DR_CH_FACTOR, DR_TERM_DATA, rest, 1);
  dr_keep_share(fs, f);
  if (inferred)
    dr_printf(f->title, sizeof f->title,
              "Input-bound: GPU %d idles %.0f%% of the time while the job's CPU is saturated (no step timings; "
              "inferred)",
              g->index, share * 100);
  else
    dr_printf(f->title, sizeof f->title, "Input-bound: %.0f%% of each step waits for the data loader",
              d->data_share * 100);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_num(&j, "data_wait_share", d->data_share);
  dr_json_num(&j, "step_s", d->step_mean);
  dr_json_num(&j, "data_wait_s", d->data_mean);
  dr_json_num(&j, "compute_s", compute_h2d_s(d));
  dr_json_num(&j, "loader_cpu_cores_min", lcpu_lo);
  dr_json_num(&j, "loader_cpu_cores_max", lcpu_hi);
  dr_json_num(&j, "loader_runq_wait_share", loader_runq(d));
  dr_json_num(&j, "loading_runq_wait_share", loading_runq(d));
  dr_json_num(&j, "job_cpu_cores", d->job_cores);
  dr_json_num(&j, "usable_cores", dr_usable_cores(d));
  dr_json_num(&j, "num_workers", isfinite(d->num_workers) ? d->num_workers : d->nprocs ? d->nworkers : NAN);
  if (saturated(d) >= 0)
    dr_json_int(&j, "cpu_saturated", saturated(d));
  else
    dr_json_num(&j, "cpu_saturated", NAN);
  if (g)
    dr_json_num(&j, "gpu_util_pct", g->util.mean);
  input_bound_model(&j, d, rest);
  char wait[200];
  input_bound_wait(d, rest, wait, sizeof wait);
  /* The loader is known busy when even its least possible CPU is not idle; otherwise the cause is
   * open (a loader using little CPU next to unknown host CPU could be starved or waiting). */
  char why[160];
  if (inferred || (isfinite(lcpu_lo) && lcpu_lo >= DR_LOADER_CPU_IDLE))
    dr_printf(why, sizeof why, "the loader is busy on the CPU");
  else
    dr_printf(why, sizeof why,
              "the loader used %s (the host's CPU or the split of the training process's CPU not measured "
              "well enough to tell CPU work from latency)",
              cores_text((char[48]){0}, 48, lcpu_lo, lcpu_hi));
  char idle[128];
  dr_printf(f->fix, sizeof f->fix,
            "%s and %s: make each "
            "batch cheaper to produce. Move costly per-sample transforms offline (preprocess once and store "
            "the result), cache decoded samples, keep augmentation light, or decode and augment on the GPU "
            "(NVIDIA DALI; torchvision.transforms.v2 on CUDA tensors). More worker processes help only while "
            "cores are idle%s.\n"
            "PyTorch:\n"
            "  # once: store the preprocessed tensors\n"
            "  torch.save(torch.stack([transform(x) for x in raw]), 'train_pre.pt')\n"
            "  ds = torch.utils.data.TensorDataset(torch.load('train_pre.pt'), labels)\n"
            "Keras / tf.data:\n"
            "  ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()  # cache before random aug\n"
            "  ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)",
            wait, why, more_workers_text(d, fs, idle, sizeof idle));
}

static void add_input_latency(struct dr_run *d, struct dr_findings *fs, int w0, double lcpu_lo, double lcpu_hi) {
  double ch = compute_h2d_s(d);
  double need = ceil(dr_fin(d->data_mean, 0) * fmax(w0, 1) / fmax(ch, DR_LATENCY_MIN_COMPUTE_S)) + DR_LATENCY_SPARE;
  int rec = need >= DR_MAX_WORKERS ? DR_MAX_WORKERS : (int)need;
  if (rec < w0 + DR_LATENCY_MIN_EXTRA)
    rec = w0 + DR_LATENCY_MIN_EXTRA;
  if (rec > DR_MAX_WORKERS)
    rec = DR_MAX_WORKERS;
  double load_s = w0 > 0 ? w0 * d->step_mean : d->data_mean;
  double s_new = fmax(ch, load_s / rec);
  /* The cost is the measured data wait (the run view's data_share); the speed-up of rec workers is
   * the step model's (dr_evaluate_changes). */
  struct store_finding *f = dr_add(fs, d, "input_latency", d->data_share, 1);
  if (!f)
    return;
  dr_set_change(fs, f, DR_CH_WORKERS, DR_TERM_DATA, rec, 1);
  dr_keep_share(fs, f);
  char bs[32];
  if (isfinite(d->batch_size))
    dr_printf(bs, sizeof bs, "%.0f", d->batch_size);
  else
    dr_printf(bs, sizeof bs, "B"); /* the job did not say its batch size */
  dr_printf(f->title, sizeof f->title,
            "Input latency: %.0f%% of each step waits for data while the loader's CPU is idle", d->data_share * 100);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_num(&j, "data_wait_share", d->data_share);
  dr_json_num(&j, "data_wait_s", d->data_mean);
  dr_json_num(&j, "step_s", d->step_mean);
  dr_json_num(&j, "loader_cpu_cores_min", lcpu_lo);
  dr_json_num(&j, "loader_cpu_cores_max", lcpu_hi);
  dr_json_num(&j, "loader_runq_wait_share", loader_runq(d));
  dr_json_num(&j, "loading_runq_wait_share", loading_runq(d));
  dr_json_num(&j, "dstate_share", dstate_share(d));
  dr_json_num(&j, "iowait_pct", d->iowait.mean);
  dr_json_num(&j, "job_read_bytes_s", d->tree_read.mean);
  dr_json_int(&j, "num_workers", w0);
  dr_json_int(&j, "recommended_workers", rec);
  dr_json_num(&j, "predicted_step_s", s_new);
  dr_json_str(&j, "model", "with enough requests in flight (workers change): step = max(compute+h2d, load / workers)");
  dr_printf(f->fix, sizeof f->fix,
            "Each batch waits %.0f ms for data, yet the loading process%s used at most %.2f cores meanwhile and "
            "%s: the time goes to latency (object storage, a network file system, a "
            "remote service), not to work. Keep more requests in flight and move data closer: more workers "
            "(cheap here, they mostly wait: about %d), deeper prefetch, a local cache (local SSD or RAM), and "
            "larger shards (WebDataset / TFRecord) instead of one small object per sample.\n"
            "PyTorch:\n"
            "  loader = torch.utils.data.DataLoader(ds, batch_size=%s, num_workers=%d,\n"
            "      prefetch_factor=4, persistent_workers=True)\n"
            "  # or a thread pool inside __getitem__/a batch sampler for I/O-only fetches\n"
            "Keras / tf.data:\n"
            "  ds = files.interleave(tf.data.TFRecordDataset, cycle_length=%d,\n"
            "      num_parallel_calls=tf.data.AUTOTUNE).cache('/local/cache').prefetch(tf.data.AUTOTUNE)",
            d->data_mean * 1e3, w0 > 1 ? "es" : "", lcpu_hi,
            isfinite(dstate_share(d)) ? "the disks show little wait"
                                      : "storage wait was not measured (no D-state readings of the job's processes)",
            rec, bs, rec, rec);
}

static void add_io_bound(struct dr_run *d, struct dr_findings *fs, double share, double dsh) {
  /* The cost is measured (the data wait, else the D-state share of the idle time); the speed-up is
   * the step model's, and 1 / (1 - share) only where there is no model (no steps and no GPU). */
  struct store_finding *f = dr_add(fs, d, "io_bound", share, 1 / (1 - fmin(share, DR_MAX_LOST)));
  if (!f)
    return;
  /* The storage wait goes: the data term, or without step timings the idle it was inferred from. */
  if (isfinite(d->data_share))
    dr_set_change(fs, f, DR_CH_FACTOR, DR_TERM_DATA, 0, 1);
  else
    dr_set_change(fs, f, DR_CH_REMOVE, DR_TERM_HOST, share, 1);
  dr_keep_share(fs, f);
  double iowait_cores = d->iowait.n && d->ncpu ? d->iowait.mean / 100 * d->ncpu : NAN;
  dr_printf(f->title, sizeof f->title, "Storage-bound: the job's loading processes wait on I/O %.0f%% of the time",
            dsh * 100);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_num(&j, "dstate_share", dsh);
  dr_json_num(&j, "dstate_procs_mean", d->tree_dstate.mean);
  dr_json_num(&j, "iowait_pct", d->iowait.mean);
  dr_json_num(&j, "iowait_cores", iowait_cores);
  dr_json_num(&j, "psi_io_some_pct", d->psi_io.mean);
  dr_json_num(&j, "job_read_bytes_s", d->tree_read.mean);
  dr_json_num(&j, "data_wait_share", d->data_share);
  dr_json_num(&j, "step_s", d->step_mean);
  dr_json_str(&j, "model", "the storage wait goes (the data term): speed-up = T / (T - data wait)");
  char rate[128], mbs[40];
  if (isfinite(d->tree_read.mean))
    dr_printf(mbs, sizeof mbs, "%.0f MB/s", d->tree_read.mean / 1e6);
  else
    dr_printf(mbs, sizeof mbs, "— MB/s (read rate not measured)");
  if (isfinite(d->psi_io.mean))
    dr_printf(rate, sizeof rate, "%s (PSI: some task stalled on I/O %.0f%% of the time)", mbs, d->psi_io.mean);
  else
    dr_printf(rate, sizeof rate, "%s", mbs);
  dr_printf(f->fix, sizeof f->fix,
            "The job's processes sat in uninterruptible I/O wait (D state) %.0f%% of the time while reading "
            "%s: storage, not the CPU, limits the input. Put the data set on local NVMe or in RAM "
            "(/dev/shm) before training, cache it near compute, and read larger sequential shards instead of "
            "many small random reads; more workers help only while the device is not saturated.\n"
            "PyTorch:\n"
            "  shutil.copytree('/mnt/data/train', '/local_nvme/train')  # once per node\n"
            "  loader = torch.utils.data.DataLoader(Dataset('/local_nvme/train'), num_workers=%d,\n"
            "      prefetch_factor=4, persistent_workers=True)\n"
            "Keras / tf.data:\n"
            "  ds = tf.data.TFRecordDataset(shards, num_parallel_reads=tf.data.AUTOTUNE)\n"
            "  ds = ds.cache('/local_nvme/cache').prefetch(tf.data.AUTOTUNE)",
            dsh * 100, rate, dr_current_workers(d) + DR_LATENCY_MIN_EXTRA);
}

void dr_rule_input(struct dr_run *d, struct dr_findings *fs) {
  int w0 = dr_current_workers(d);
  double dsh = dstate_share(d);
  int io = (isfinite(dsh) && dsh >= DR_IO_DSTATE) ||
           (isfinite(dsh) && dsh >= DR_IO_DSTATE_PSI && d->psi_io.n && d->psi_io.mean >= DR_IO_PSI);
  if (!(d->data_share >= DR_INPUT_SHARE)) {
    /* Without step timings: a saturated CPU next to an idle GPU, or processes stuck in I/O (the cost
     * scaled by the used GPU's idle share; without a GPU, all of the D-state share). */
    const struct dr_gpu *g = used_gpu(d);
    if (!isfinite(d->data_share) && g && g->util.mean < DR_INFER_GPU_UTIL && saturated(d) == 1 && !io)
      add_input_bound(d, fs, NAN, NAN, 1);
    else if (!isfinite(d->data_share) && io && (g || !d->ngpus))
      add_io_bound(d, fs, dsh * (g ? 1 - g->util.mean / 100 : 1), dsh);
    return;
  }
  double lo, hi;
  loader_cpu(d, &lo, &hi);
  if (io) {
    add_io_bound(d, fs, d->data_share, dsh);
    return;
  }
  /* Latency: even the most the loader could have used is little, the CPU is known not full, and the
   * loader did not wait for a CPU (a starved loader uses little CPU too: its run-queue wait tells them
   * apart where the kernel keeps schedstat; docs/diagnosis.md). */
  double runq = loading_runq(d);
  if (isfinite(hi) && hi < DR_LOADER_CPU_IDLE && saturated(d) == 0 && !(runq >= DR_LOADER_STARVED)) {
    add_input_latency(d, fs, w0, lo, hi);
    return;
  }
  /* Per-batch loading time: all of the data wait without workers; with w0 workers that keep the step
   * waiting, each batch takes w0 steps to make. The cheap win first, so the general finding can point
   * to it. */
  double load_s = w0 > 0 ? w0 * d->step_mean : d->data_mean;
  if (isfinite(load_s))
    add_loader_workers(d, fs, w0, load_s, lo, hi);
  add_input_bound(d, fs, lo, hi, 0);
}

/* ---- host code ---- */

static double stall_share(const struct dr_findings *fs) {
  for (size_t i = 0; i < fs->n; i++)
    if (!strcmp(fs->v[i].rule, "periodic_stall"))
      return fs->v[i].share;
  return 0;
}

/* What both host_code_bound rules start from: 0 when the data wait (or an input finding) already
 * explains the time, or the host's CPUs are contended; else 1, with the stall share already counted, the training
 * process' cores, and whether the data wait is known (without step timings it is unknown, not zero). */
static int host_code_start(struct dr_run *d, const struct dr_findings *fs, double *stall, double *m, int *known) {
  if (d->data_share >= DR_INPUT_SHARE || dr_has(fs, "io_bound") || dr_has(fs, "input_bound"))
    return 0;
  /* A host whose tasks wait for a CPU most of the time: the job's low CPU is contention (it is
   * runnable, not blocked), not its own code waiting — and the verdict says it was not judged. */
  if (cpu_contended(d)) {
    dr_not_judged(d,
                  "host_code_bound: the host's CPUs were contended (tasks waited for a CPU %.0f%% of the "
                  "time), so a job's low CPU cannot tell a loop that blocks from one that waits for a CPU",
                  d->psi_cpu.mean);
    return 0;
  }
  *stall = stall_share(fs), *m = main_cpu(d);
  *known = isfinite(d->data_share);
  return 1;
}

/* host_code_bound with GPUs: the GPU idle, the data wait and the CPU not short. */
void dr_rule_host_code_gpu(struct dr_run *d, struct dr_findings *fs) {
  double stall, m;
  int known;
  if (!d->ngpus || !host_code_start(d, fs, &stall, &m, &known))
    return;
  double ds = known ? d->data_share : 0;
  double util = d->used_util;
  if (!isfinite(util) || saturated(d) != 0 || util >= DR_HOSTCODE_GPU_UTIL)
    return;
  /* Unknown data wait: the idle share is an upper bound of what host code costs. */
  double share = fmax(0, 1 - util / 100 - ds - stall);
  if (share < DR_HOSTCODE_MIN_SHARE)
    return;
  struct store_finding *f = dr_add(fs, d, "host_code_bound", share, 1 / (1 - fmin(share, DR_MAX_LOST)));
  if (!f)
    return;
  /* The host idle term shrinks until the GPU is busy DR_HOSTCODE_TARGET_UTIL of the compute path. */
  dr_set_change(fs, f, DR_CH_HOST_TO_UTIL, DR_TERM_HOST, DR_HOSTCODE_TARGET_UTIL / 100, DR_HOSTCODE_MIN_SPEEDUP);
  int launch = isfinite(m) && m >= DR_LAUNCH_CORES;
  if (!known)
    dr_printf(f->title, sizeof f->title,
              "Host code or data loading: the GPU is busy %.0f%% of the time and the CPU is not short (no step "
              "timings, so the data wait is unknown)",
              util);
  else
    dr_printf(f->title, sizeof f->title,
              "Host code: the GPU is busy %.0f%% of the time, yet neither data nor CPU "
              "is short (%s)",
              util, launch ? "the Python thread is saturated: launch overhead" : "sync points");
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_num(&j, "gpu_util_pct", util);
  dr_json_num(&j, "data_wait_share", d->data_share);
  dr_json_num(&j, "main_process_cpu_cores", m);
  dr_json_num(&j, "job_cpu_cores", d->job_cores);
  dr_json_num(&j, "usable_cores", dr_usable_cores(d));
  dr_json_num(&j, "periodic_stall_share", stall);
  dr_json_str(&j, "model",
              "the host idle term shrinks until the GPU is busy 90% of the compute path: speed-up = T / T'");
  dr_printf(f->fix, sizeof f->fix,
            "%s%s Profile one step and remove what makes the GPU wait: host syncs (loss.item(), .cpu(), "
            "printing tensors, torch.cuda.synchronize()), many tiny kernels, Python work between steps.\n"
            "PyTorch:\n"
            "  from torch.profiler import profile, ProfilerActivity\n"
            "  with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:\n"
            "      train_step(x, y)\n"
            "  print(p.key_averages().table(sort_by='self_cpu_time_total', row_limit=15))\n"
            "  if step %% 100 == 0: print(loss.item())   # sync only when logging\n"
            "  model = torch.compile(model)             # fuses small kernels (or CUDA graphs)\n"
            "Keras:\n"
            "  model.compile(optimizer, loss, jit_compile=True, steps_per_execution=32)",
            known ? ""
                  : "The job sent no step timings, so gpuscope cannot tell a data wait from host code: wrap the "
                    "loader with gpuscope.watch(loader) to know which. ",
            !known   ? "Meanwhile:"
            : launch ? "The training process keeps a core busy (launch overhead: the GPU finishes each small "
                       "kernel before Python issues the next)."
                     : "The training process is mostly idle too: the loop waits on synchronisation or blocking "
                       "calls.");
}

/* host_code_bound on a CPU-only run: the CPU is the accelerator; a job that neither waits for data nor
 * keeps a core busy is waiting on something else. */
void dr_rule_host_code_cpu(struct dr_run *d, struct dr_findings *fs) {
  double stall, m;
  int known;
  if (d->ngpus || !host_code_start(d, fs, &stall, &m, &known))
    return;
  double ds = known ? d->data_share : 0;
  if (d->nsteps < DR_MIN_STEPS || !known || !isfinite(d->job_cores) || d->job_cores >= DR_HOSTCODE_CPU_CORES)
    return;
  double share = fmax(0, fmin(1 - d->job_cores, 1 - ds) - stall);
  if (share < DR_HOSTCODE_MIN_SHARE)
    return;
  struct store_finding *f = dr_add(fs, d, "host_code_bound", share, 1 / (1 - fmin(share, DR_MAX_LOST)));
  if (!f)
    return;
  dr_set_change(fs, f, DR_CH_REMOVE, DR_TERM_HOST, share, DR_HOSTCODE_MIN_SPEEDUP);
  dr_printf(f->title, sizeof f->title,
            "Host code: the job keeps only %.2f cores busy and does not wait for data: the loop blocks", d->job_cores);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_num(&j, "job_cpu_cores", d->job_cores);
  dr_json_num(&j, "main_process_cpu_cores", m);
  dr_json_num(&j, "data_wait_share", d->data_share);
  dr_json_num(&j, "step_s", d->step_mean);
  dr_json_num(&j, "periodic_stall_share", stall);
  dr_json_str(&j, "model",
              "on a CPU-only run the host term loses 1 - job CPU cores (at most 1 - data wait share) of the window");
  dr_printf(f->fix, sizeof f->fix,
            "No GPU, no data wait, and the job uses %.2f cores: each step spends about %.0f%% of its time "
            "blocked (sleep, locks, network round trips, synchronous logging or checkpoint I/O). Find the wait "
            "and take it off the step's path.\n"
            "PyTorch:\n"
            "  py-spy dump --pid PID        # where the loop waits, right now\n"
            "  with torch.profiler.profile() as p: train_step(x, y)\n"
            "  print(p.key_averages().table(sort_by='cpu_time_total', row_limit=15))\n"
            "  # move logging/metrics upload to a background thread; batch remote calls\n"
            "Keras:\n"
            "  tf.profiler.experimental.start('logs'); model.fit(...); tf.profiler.experimental.stop()",
            d->job_cores, share * 100);
}

/* ---- periodic stalls ---- */

struct stall {
  double t, excess; /* start (s since run start), seconds lost */
  double data;      /* data wait inside it, s (NAN unknown) */
  uint32_t stretch; /* the view's stretch of steps it lies in: spacing is measured within one only */
};

/* Gaps between steps far longer than usual, between consecutive steps only (within one stretch when
 * the view holds a sample of a long run). Returns the count found (at most cap); *scanned is the time
 * the gaps looked at cover, s. */
static size_t step_stalls(const struct dr_run *d, struct stall *out, size_t cap, double *typical, double *scanned) {
  size_t n = d->nsteps, k = 0, m = 0;
  *scanned = 0;
  if (n < DR_STALL_MIN_STEPS)
    return 0;
  double *gaps = malloc((n - 1) * sizeof *gaps);
  if (!gaps)
    return 0;
  for (size_t i = 1; i < n; i++)
    if (d->steps[i].stretch == d->steps[i - 1].stretch)
      gaps[m++] = (double)(d->steps[i].t - d->steps[i - 1].t) / GS_NS_PER_S;
  if (!m) {
    free(gaps);
    return 0;
  }
  qsort(gaps, m, sizeof *gaps, runview_cmp_double);
  double med = gaps[(m - 1) / 2];
  free(gaps);
  *typical = med;
  for (size_t i = 1; i < n && k < cap; i++) {
    if (d->steps[i].stretch != d->steps[i - 1].stretch)
      continue;
    double g = (double)(d->steps[i].t - d->steps[i - 1].t) / GS_NS_PER_S;
    *scanned += g;
    if (doctor_is_stall(g, med))
      out[k++] =
          (struct stall){(double)d->steps[i - 1].t / GS_NS_PER_S, g - med, d->steps[i].data, d->steps[i].stretch};
  }
  return k;
}

/* Stretches of a GPU's utilisation below the idle line between busy ones, found in one streamed walk
 * over the samples: a week at 10 Hz is millions of them, none of which needs keeping. */
struct idle_walk {
  struct stall *out;
  size_t k, cap;
  int seen, idle, after_busy;
  int64_t idle_t;
};

static int idle_walk_put(void *user, int64_t t, double v) {
  struct idle_walk *w = user;
  if (!isfinite(v))
    return 0;
  if (v < DR_IDLE_GPU_UTIL) {
    if (!w->idle)
      w->idle = 1, w->idle_t = t, w->after_busy = w->seen;
  } else if (w->idle) {
    /* Idle from idle_t until this first busy sample; only gaps between busy stretches count. */
    double len = (double)(t - w->idle_t) / GS_NS_PER_S;
    if (w->after_busy && len >= DR_STALL_MIN_S)
      w->out[w->k++] = (struct stall){(double)w->idle_t / GS_NS_PER_S, len, NAN, 0};
    w->idle = 0;
  }
  w->seen = 1;
  return w->k >= w->cap;
}

/* The stalls of the first used GPU's utilisation. Returns the count found (at most cap). */
static size_t gpu_stalls(struct dr_run *d, struct stall *out, size_t cap, double *typical) {
  const struct dr_gpu *g = NULL;
  for (int i = 0; i < d->ngpus && !g; i++)
    if (d->gpus[i].used && d->gpus[i].util_series >= 0)
      g = &d->gpus[i];
  if (!g)
    return 0;
  struct idle_walk w = {.out = out, .cap = cap};
  if (d->v->st->samples_read(d->v->st, g->util_series, d->from, d->to, idle_walk_put, &w) < 0)
    return 0;
  *typical = NAN;
  return w.k;
}

/* What the stalls add up to: the time they cost, the data wait inside them, and how regular they are
 * (the mean and the coefficient of variation of the time between their starts). */
struct stall_pattern {
  double lost, data_in, period, cv;
  int data_known;
};

static void stall_pattern(const struct stall *st, size_t n, struct stall_pattern *p) {
  double dsum = 0, var = 0;
  p->lost = p->data_in = 0;
  p->data_known = 1;
  for (size_t i = 0; i < n; i++) {
    p->lost += st[i].excess;
    if (isfinite(st[i].data))
      p->data_in += st[i].data;
    else
      p->data_known = 0;
  }
  size_t m = 0; /* spacings: between stalls of one stretch (all of them, when every step is held) */
  for (size_t i = 1; i < n; i++)
    if (st[i].stretch == st[i - 1].stretch)
      dsum += st[i].t - st[i - 1].t, m++;
  p->period = m ? dsum / (double)m : NAN;
  for (size_t i = 1; i < n; i++)
    if (st[i].stretch == st[i - 1].stretch)
      var += pow(st[i].t - st[i - 1].t - p->period, 2);
  p->cv = m && p->period > 0 ? sqrt(var / (double)m) / p->period : INFINITY;
}

/* What the job said it was doing then: the names of its marks within a second before or during a
 * stall, comma-separated, into marks. */
static void stall_marks(const struct dr_run *d, const struct stall *st, size_t n, double typical, char *marks,
                        size_t cap) {
  size_t mlen = 0;
  marks[0] = 0;
  for (size_t e = 0; e < d->v->nevents; e++) {
    const struct store_event *ev = &d->v->events[e];
    if (strcmp(ev->kind, "mark") || !ev->name[0])
      continue;
    double t = (double)ev->t / GS_NS_PER_S;
    int near = 0;
    for (size_t i = 0; i < n && !near; i++)
      near = t >= st[i].t - DR_STALL_MARK_S &&
             t <= st[i].t + st[i].excess + typical * DR_STALL_MARK_STEPS + DR_STALL_MARK_S;
    if (near && !strstr(marks, ev->name) && mlen + strlen(ev->name) + 3 < cap)
      mlen += (size_t)snprintf(marks + mlen, cap - mlen, "%s%s", mlen ? ", " : "", ev->name);
  }
}

static void stall_finding(struct dr_run *d, struct dr_findings *fs, const char *source, size_t n, double typical,
                          double span, const struct stall_pattern *p, const char *marks) {
  double share = p->lost / span, mean_gap = p->period, lost = p->lost;
  /* The stalls' own data wait, for the step model: what their steps waited beyond a step's usual wait. */
  double extra = p->data_known && isfinite(d->data_mean) ? fmax(0, p->data_in - (double)n * d->data_mean) : NAN;
  d->stall_data_share = extra / span;
  int loader = p->data_known && p->data_in >= DR_STALL_LOADER * lost;
  struct store_finding *f = dr_add(fs, d, "periodic_stall", share, 1 / (1 - fmin(share, DR_MAX_LOST)));
  if (!f)
    return;
  dr_set_change(fs, f, DR_CH_FACTOR, DR_TERM_STALL, 0, 1);
  dr_printf(f->title, sizeof f->title, "Periodic stalls: every %.1f s the training stops for %.1f s (%zu times%s%s)",
            mean_gap, lost / (double)n, n, marks[0] ? ", at " : "", marks);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_str(&j, "source", source);
  dr_json_int(&j, "stalls", (long long)n);
  dr_json_num(&j, "period_s", mean_gap);
  dr_json_num(&j, "mean_stall_s", lost / (double)n);
  dr_json_num(&j, "spacing_cv", p->cv);
  dr_json_num(&j, "lost_s", lost);
  dr_json_num(&j, "typical_step_gap_s", typical);
  dr_json_num(&j, "data_wait_in_stalls_s", p->data_known ? p->data_in : NAN);
  dr_json_str(&j, "marks", marks);
  char sampled[96];
  if (span != d->window_s)
    dr_json_str(&j, "steps_sampled", runview_steps_sampling(d->v, sampled, sizeof sampled));
  dr_json_str(&j, "model", "the stall term goes: speed-up = T / (T - stalls) = 1 / (1 - stall share)");
  dr_printf(f->fix, sizeof f->fix,
            "%s Every %.1f s the loop stops for about %.1f s — %.0f%% of the run. %s\n"
            "PyTorch:\n"
            "  # checkpoint without stopping: copy to CPU, write from a thread (or\n"
            "  # torch.distributed.checkpoint.async_save in PyTorch >= 2.3)\n"
            "  state = {k: v.detach().cpu() for k, v in model.state_dict().items()}\n"
            "  threading.Thread(target=torch.save, args=(state, path)).start()\n"
            "  if step %% eval_every == 0: evaluate(model, val_subset)   # evaluate less often, on a subset\n"
            "  DataLoader(..., persistent_workers=True)   # no worker restart at each epoch\n"
            "Keras:\n"
            "  model.fit(..., validation_freq=5, callbacks=[keras.callbacks.ModelCheckpoint(path, save_freq=5000)])",
            loader     ? "The stalls are data waits at epoch boundaries: the loader's workers restart and refill."
            : marks[0] ? "The stalls line up with the job's own marks (evaluation, checkpointing)."
                       : "Something regular stops the loop (evaluation, checkpointing, logging).",
            mean_gap, lost / (double)n, share * 100,
            loader ? "Keep workers alive (persistent_workers=True) and prefetch across the boundary."
                   : "Make checkpoints asynchronous, evaluate less often or on a subset, and overlap both with "
                     "training.");
}

void dr_rule_periodic_stall(struct dr_run *d, struct dr_findings *fs) {
  struct stall st[512];
  double typical = NAN, scanned;
  size_t n = step_stalls(d, st, 512, &typical, &scanned);
  const char *source = "step gaps";
  /* Over a sample of a long run's steps, the stalls' share is of the time the gaps looked at cover. */
  double span = runview_steps_sampled(d->v) ? scanned : d->window_s;
  if (n < DR_STALL_MIN_COUNT) {
    n = gpu_stalls(d, st, 512, &typical);
    source = "GPU idle gaps";
    span = d->window_s;
  }
  if (n < DR_STALL_MIN_COUNT || !(d->window_s > 0) || !(span > 0))
    return;
  struct stall_pattern p;
  stall_pattern(st, n, &p);
  if (p.cv > DR_STALL_REGULARITY || p.lost / span < DR_STALL_MIN_SHARE)
    return;
  char marks[128];
  stall_marks(d, st, n, typical, marks, sizeof marks);
  stall_finding(d, fs, source, n, typical, span, &p, marks);
}
