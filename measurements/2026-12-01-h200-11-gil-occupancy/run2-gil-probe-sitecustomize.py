import os, sys, threading, time, traceback
if os.environ.get("GILPROBE") and "gpuflow" in " ".join(sys.argv + [os.environ.get("GILPROBE_ANY","")]):
    def _probe():
        out = open(os.environ["GILPROBE"] + f".{os.getpid()}", "a")
        me = threading.get_ident()
        while True:
            t = time.perf_counter(); time.sleep(0.002)
            late = time.perf_counter() - t - 0.002
            if late > 0.03:
                out.write(f"--- late {late*1000:.1f} ms\n")
                for tid, fr in sys._current_frames().items():
                    if tid == me: continue
                    st = traceback.extract_stack(fr)[-4:]
                    out.write("  thread: " + " <- ".join(f"{os.path.basename(s.filename)}:{s.lineno}:{s.name}" for s in reversed(st)) + "\n")
                out.flush()
    threading.Thread(target=_probe, daemon=True).start()
if os.environ.get("GILSWITCH"):
    sys.setswitchinterval(float(os.environ["GILSWITCH"]))
