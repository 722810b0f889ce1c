package processnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Config configures a Node. Client, ServerBinary and Dir are required.
type Config struct {
	Client kubernetes.Interface
	// Dynamic, when set, enables orphan cleanup (the garbage collector's
	// cascade) over GCResources.
	Dynamic dynamic.Interface
	// Name is the Node's name; default "process-node".
	Name string
	// ServerBinary is the sandbox-server executable run for each pod.
	ServerBinary string
	// Dir holds per-pod directories (Dir/pods/<uid>) and server logs (Dir/logs).
	Dir string
	// GoCacheSeed, when set, is a Go build cache copied into each pod's
	// GOCACHE before its process starts, as the template's seed-cache init
	// container copies the image's prebuilt cache. A pod whose env names no
	// GOCACHE gets Dir/pods/<uid>/gocache.
	GoCacheSeed string
	// PodPrefix is the loopback prefix pod IPs come from; default 127.77.0.0/16.
	PodPrefix netip.Prefix
	// MaxGracePeriod caps a pod's termination grace period; default 5 s.
	MaxGracePeriod time.Duration
	// GCInterval is how often orphans are looked for; default 500 ms.
	GCInterval time.Duration
	// GCResources lists the resources orphan cleanup scans; default
	// DefaultGCResources.
	GCResources []GCResource
	// PIDFile, when set, collects the PID of every pod process started (each
	// leads its own process group), so a wrapper can kill them if the
	// process running the node dies.
	PIDFile string
	// Workers is the number of pods reconciled at once; default 4.
	Workers int
	Logger  *slog.Logger
}

// Node is a running process node. Create it with New, then call Run.
type Node struct {
	cfg    Config
	log    *slog.Logger
	ips    *ipAllocator
	queue  workqueue.TypedRateLimitingInterface[string]
	lister corelisters.PodLister

	mu      sync.Mutex
	workers map[string]*podWorker // by namespace/name
}

// New checks cfg and fills in defaults. It fails when a required field is
// missing or ServerBinary is not an executable file.
func New(cfg Config) (*Node, error) {
	if cfg.Client == nil {
		return nil, errors.New("processnode: Config.Client is required")
	}
	if cfg.Dir == "" {
		return nil, errors.New("processnode: Config.Dir is required")
	}
	st, err := os.Stat(cfg.ServerBinary)
	if err != nil {
		return nil, fmt.Errorf("processnode: server binary: %w", err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("processnode: server binary %s is not an executable file", cfg.ServerBinary)
	}
	if cfg.Name == "" {
		cfg.Name = "process-node"
	}
	if !cfg.PodPrefix.IsValid() {
		cfg.PodPrefix = netip.MustParsePrefix("127.77.0.0/16")
	}
	if cfg.MaxGracePeriod <= 0 {
		cfg.MaxGracePeriod = 5 * time.Second
	}
	if cfg.GCInterval <= 0 {
		cfg.GCInterval = 500 * time.Millisecond
	}
	if cfg.GCResources == nil {
		cfg.GCResources = DefaultGCResources()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ips, err := newIPAllocator(cfg.PodPrefix)
	if err != nil {
		return nil, fmt.Errorf("processnode: %w", err)
	}
	return &Node{
		cfg:     cfg,
		log:     cfg.Logger.With("node", cfg.Name),
		ips:     ips,
		workers: map[string]*podWorker{},
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}, nil
}

// Name is the Node object's name.
func (n *Node) Name() string { return n.cfg.Name }

// Pod returns the process standing for the pod namespace/name, if the node
// runs one.
func (n *Node) Pod(namespace, name string) (PodProcess, bool) {
	n.mu.Lock()
	w, ok := n.workers[namespace+"/"+name]
	n.mu.Unlock()
	if !ok {
		return PodProcess{}, false
	}
	return w.snapshot(), true
}

// Pods lists the processes the node runs.
func (n *Node) Pods() []PodProcess {
	n.mu.Lock()
	ws := make([]*podWorker, 0, len(n.workers))
	for _, w := range n.workers {
		ws = append(ws, w)
	}
	n.mu.Unlock()
	out := make([]PodProcess, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.snapshot())
	}
	return out
}

// Run registers the Node and serves pods until ctx is done, then stops
// every pod process and returns. It returns early with an error when the
// Node cannot be registered or the pod informer never syncs.
func (n *Node) Run(ctx context.Context) error {
	if err := n.register(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(n.cfg.Client, 0)
	podInformer := factory.Core().V1().Pods()
	n.lister = podInformer.Lister()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			n.queue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("processnode: pod event handler: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("processnode: informer for %v did not sync", typ)
		}
	}
	n.log.Info("process node ready", "pod_prefix", n.cfg.PodPrefix, "server", n.cfg.ServerBinary)

	var wg sync.WaitGroup
	for range n.cfg.Workers {
		wg.Go(func() {
			for n.processNext(ctx) {
			}
		})
	}
	if n.cfg.Dynamic != nil {
		wg.Go(func() { n.collectGarbage(ctx) })
	}
	<-ctx.Done()
	n.queue.ShutDown()
	wg.Wait()
	n.stopAll()
	return nil
}

func (n *Node) processNext(ctx context.Context) bool {
	key, quit := n.queue.Get()
	if quit {
		return false
	}
	defer n.queue.Done(key)
	if err := n.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			n.log.Warn("sync pod", "pod", key, "err", err)
		}
		n.queue.AddRateLimited(key)
		return true
	}
	n.queue.Forget(key)
	return true
}

// sync brings the node's view of one pod in line with the API: bind it if
// unbound, start its process if bound here, stop it and finish the
// deletion (as a kubelet confirms termination) when it is being deleted.
func (n *Node) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := n.lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		n.stopWorker(key, "")
		return nil
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		if pod.DeletionTimestamp != nil {
			return nil
		}
		return n.bind(ctx, pod)
	}
	if pod.Spec.NodeName != n.cfg.Name {
		return nil
	}
	if pod.DeletionTimestamp != nil {
		n.stopWorker(key, "")
		err := n.cfg.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr(int64(0)),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("finish deleting pod %s: %w", key, err)
		}
		return nil
	}
	n.stopWorker(key, pod.UID) // a same-named pod from before
	n.ensureWorker(ctx, key, pod)
	return nil
}

func (n *Node) bind(ctx context.Context, pod *corev1.Pod) error {
	err := n.cfg.Client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.cfg.Name},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("bind pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (n *Node) ensureWorker(ctx context.Context, key string, pod *corev1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.workers[key]; ok {
		return
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &podWorker{
		node:   n,
		log:    n.log.With("pod", key, "uid", pod.UID),
		uid:    pod.UID,
		cancel: cancel,
		done:   make(chan struct{}),
	}
	n.workers[key] = w
	go w.run(wctx, pod.DeepCopy())
}

// stopWorker stops the worker for key and waits for its process to end.
// With keep set, a worker for that pod UID is left alone.
func (n *Node) stopWorker(key string, keep types.UID) {
	n.mu.Lock()
	w, ok := n.workers[key]
	if ok && (keep == "" || w.uid != keep) {
		delete(n.workers, key)
	} else {
		ok = false
	}
	n.mu.Unlock()
	if ok {
		w.cancel()
		<-w.done
	}
}

func (n *Node) stopAll() {
	n.mu.Lock()
	ws := n.workers
	n.workers = map[string]*podWorker{}
	n.mu.Unlock()
	for _, w := range ws {
		w.cancel()
	}
	for _, w := range ws {
		<-w.done
	}
}

// register creates (or refreshes) the Node object with a Ready condition.
func (n *Node) register(ctx context.Context) error {
	nodes := n.cfg.Client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: n.cfg.Name,
			Labels: map[string]string{
				"kubernetes.io/hostname": n.cfg.Name,
				"kubernetes.io/os":       runtime.GOOS,
				"kubernetes.io/arch":     runtime.GOARCH,
			},
		}}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("processnode: register node %s: %w", n.cfg.Name, err)
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	node.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "ProcessNodeReady",
			Message: "process node runs pods as local processes", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
			{Type: corev1.NodeHostName, Address: n.cfg.Name},
		},
		NodeInfo: corev1.NodeSystemInfo{
			OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
			KubeletVersion: "v1.36.3", ContainerRuntimeVersion: "processnode://0",
		},
	}
	if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("processnode: node %s status: %w", n.cfg.Name, err)
	}
	return nil
}
