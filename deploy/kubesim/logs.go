package main

// A kubelet-like log endpoint, so `kubectl logs` and the pod log API work against fake nodes.
// The apiserver reaches it at the nodes' ExternalIP (127.0.0.1) and kubelet port; the lines
// are synthetic but follow the container's life: one line per second while it runs, a final
// line with its exit code, and `follow` streams until the container stops.

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// maxLogLines bounds what one request renders, whatever the container's age.
const maxLogLines = 100000

type containerLife struct {
	image    string
	command  []string
	started  time.Time
	finished *time.Time
	exitCode int32
	found    bool
}

func (fk *fakeKubelet) containerLife(namespace, podName, container string) (containerLife, error) {
	pod, err := fk.lister.Pods(namespace).Get(podName)
	if err != nil {
		return containerLife{}, err
	}
	life := containerLife{}
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			life.found = true
			life.image = c.Image
			life.command = append(append([]string{}, c.Command...), c.Args...)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		switch {
		case cs.State.Running != nil:
			life.started = cs.State.Running.StartedAt.Time
		case cs.State.Terminated != nil:
			life.started = cs.State.Terminated.StartedAt.Time
			end := cs.State.Terminated.FinishedAt.Time
			life.finished = &end
			life.exitCode = cs.State.Terminated.ExitCode
		}
	}
	if life.started.IsZero() && pod.Status.StartTime != nil {
		life.started = pod.Status.StartTime.Time
	}
	return life, nil
}

// logLine is the i-th line of a container's log (0 = the start banner).
func logLine(podName, container string, life containerLife, i int) (time.Time, string) {
	at := life.started.Add(time.Duration(i) * time.Second)
	if i == 0 {
		return at, fmt.Sprintf("kubesim: %s/%s started %s %s", podName, container, life.image,
			strings.Join(life.command, " "))
	}
	return at, fmt.Sprintf("kubesim: %s/%s step %d", podName, container, i)
}

func (fk *fakeKubelet) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	// /containerLogs/{namespace}/{pod}/{container}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/"), "/")
	if len(parts) != 3 {
		http.Error(w, "expected /containerLogs/{namespace}/{pod}/{container}", http.StatusBadRequest)
		return
	}
	namespace, podName, container := parts[0], parts[1], parts[2]
	q := r.URL.Query()
	follow := q.Get("follow") == "true"
	timestamps := q.Get("timestamps") == "true"
	tail := -1
	if v := q.Get("tailLines"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			tail = n
		}
	}
	life, err := fk.containerLife(namespace, podName, container)
	if apierrors.IsNotFound(err) || (err == nil && !life.found) {
		http.Error(w, fmt.Sprintf("container %q in pod %s/%s not found", container, namespace, podName), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if life.started.IsZero() {
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start", container, podName), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	flusher, _ := w.(http.Flusher)
	write := func(at time.Time, text string) bool {
		line := text + "\n"
		if timestamps {
			line = at.UTC().Format(time.RFC3339Nano) + " " + line
		}
		_, err := w.Write([]byte(line))
		return err == nil
	}
	// Lines written so far: one per elapsed second (bounded), then the exit line if it ended.
	count := func(l containerLife) int {
		end := time.Now()
		if l.finished != nil {
			end = *l.finished
		}
		n := int(end.Sub(l.started)/time.Second) + 1
		if n < 1 {
			n = 1
		}
		if n > maxLogLines {
			n = maxLogLines
		}
		return n
	}
	n := count(life)
	first := 0
	if tail >= 0 && n > tail {
		first = n - tail
	}
	for i := first; i < n; i++ {
		at, text := logLine(podName, container, life, i)
		if !write(at, text) {
			return
		}
	}
	if life.finished != nil {
		write(*life.finished, fmt.Sprintf("kubesim: %s/%s exited with code %d", podName, container, life.exitCode))
		return
	}
	if !follow {
		return
	}
	if flusher != nil {
		flusher.Flush()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for next := n; ; {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		life, err = fk.containerLife(namespace, podName, container)
		if err != nil {
			return // the pod is gone
		}
		upTo := count(life)
		for ; next < upTo; next++ {
			at, text := logLine(podName, container, life, next)
			if !write(at, text) {
				return
			}
		}
		if life.finished != nil {
			write(*life.finished, fmt.Sprintf("kubesim: %s/%s exited with code %d", podName, container, life.exitCode))
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// startLogServer listens on 127.0.0.1 (a free port) with the given serving certificate and
// returns the port the nodes advertise as their kubelet endpoint.
func (fk *fakeKubelet) startLogServer(ctx context.Context, certFile, keyFile string) (int, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return 0, fmt.Errorf("log server certificate: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/containerLogs/", fk.serveContainerLogs)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && err != http.ErrServerClosed {
			log.Printf("fake-kubelet: log server: %v", err)
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
