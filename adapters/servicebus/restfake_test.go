package servicebus

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// restFake is a Service Bus REST data plane written from the
// documentation (docs/wire-servicebus.md §7), not from the
// adapter: send (single and batch), peek-lock with a long-poll timeout,
// complete (DELETE), unlock (PUT) and renew (POST) on the lock URL, SAS
// and bearer authorization, custom-property type inference from the
// header text, lock expiry, scheduled messages, topics with
// subscriptions, and sessions refused for receiving.
//
// Where the documentation is silent the fake does what the .NET service
// would: a Double renders as .NET's round-trip text (1.0 as "1").
type restFake struct {
	srv       *httptest.Server
	namespace string // the host SAS tokens must name
	keyName   string
	key       string
	bearer    string // an accepted Entra ID token
	lockDur   time.Duration
	maxSize   int

	mu       sync.Mutex
	queues   map[string]*fakeEntity // lower-case entity path
	topics   map[string][]string    // lower-case topic → subscriptions
	seq      int64
	requests []string // "METHOD path → status"
}

type fakeEntity struct {
	path     string
	sessions bool
	msgs     []*fakeMsg
	changed  chan struct{}
}

// fakeProp is a custom property with the type Service Bus inferred.
type fakeProp struct {
	name string
	kind string // String, DateTime, Boolean, Int64, Double
	s    string
	t    time.Time
	b    bool
	i    int64
	f    float64
}

type fakeMsg struct {
	seq           int64
	body          []byte
	contentType   string
	bp            map[string]any // the settable broker properties sent
	props         []fakeProp
	enqueued      time.Time
	visibleAt     time.Time
	deliveryCount int
	lockToken     string
	lockedUntil   time.Time
}

func newRESTFake(t *testing.T) *restFake {
	f := &restFake{namespace: "fakens.servicebus.windows.net", keyName: "RootManageSharedAccessKey", key: "rest-fake-key=",
		bearer: "entra-token-1", lockDur: 2 * time.Second, maxSize: 256 * 1024,
		queues: map[string]*fakeEntity{}, topics: map[string][]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *restFake) addQueue(name string, sessions bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := strings.ToLower(name)
	f.queues[k] = &fakeEntity{path: name, sessions: sessions, changed: make(chan struct{})}
}

func (f *restFake) addTopic(name string, subs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range subs {
		p := name + "/subscriptions/" + s
		f.queues[strings.ToLower(p)] = &fakeEntity{path: p, changed: make(chan struct{})}
	}
	f.topics[strings.ToLower(name)] = subs
}

// connString is a connection string for the fake (its endpoint goes in
// the adapter's endpoint field).
func (f *restFake) connString(key string) string {
	return fmt.Sprintf("Endpoint=sb://%s/;SharedAccessKeyName=%s;SharedAccessKey=%s", f.namespace, f.keyName, key)
}

func (f *restFake) conn() ConnConfig {
	return ConnConfig{ConnectionString: f.connString(f.key), Transport: "https", Endpoint: f.srv.URL, RetryDelay: "20ms", RetryDelayMax: "100ms"}
}

func (f *restFake) log(r *http.Request, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, status))
}

func (f *restFake) count(method, suffix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if strings.HasPrefix(r, method+" ") && strings.Contains(r, suffix) {
			n++
		}
	}
	return n
}

func fail(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<Error><Code>%d</Code><Detail>%s</Detail></Error>", status, fmt.Sprintf(format, args...))
}

func (f *restFake) serve(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, status: 200}
	defer func() { f.log(r, rec.status) }()
	w = rec
	path := strings.Trim(r.URL.EscapedPath(), "/")
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i], _ = url.PathUnescape(s)
	}
	// {entity}/messages, {entity}/messages/head, {entity}/messages/{ref}/{token}
	mi := -1
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i] == "messages" {
			mi = i
			break
		}
	}
	if mi < 1 {
		fail(w, http.StatusNotFound, "no such operation")
		return
	}
	entity := strings.Join(segs[:mi], "/")
	if err := f.authorize(r, entity); err != nil {
		fail(w, http.StatusUnauthorized, "%v", err)
		return
	}
	rest := segs[mi+1:]
	switch {
	case len(rest) == 0 && r.Method == http.MethodPost:
		f.send(w, r, entity)
	case len(rest) == 1 && rest[0] == "head" && r.Method == http.MethodPost:
		f.peekLock(w, r, entity)
	case len(rest) == 2:
		f.lockOp(w, r, entity, rest[0], rest[1])
	default:
		fail(w, http.StatusMethodNotAllowed, "unsupported")
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// authorize checks the Authorization header (docs/wire-servicebus.md §3.2, §7):
// a SharedAccessSignature whose signature is HMAC-SHA256 (keyed by the
// key's text) of the URL-encoded resource as it appears in the token, a
// newline and the expiry; not expired; a resource that is a prefix of the
// requested one. Or a bearer token.
func (f *restFake) authorize(r *http.Request, entity string) error {
	h := r.Header.Get("Authorization")
	if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
		if tok != f.bearer {
			return fmt.Errorf("InvalidToken: unknown bearer token")
		}
		return nil
	}
	body, ok := strings.CutPrefix(h, "SharedAccessSignature ")
	if !ok {
		return fmt.Errorf("MissingToken: no SharedAccessSignature or Bearer authorization")
	}
	fields := map[string]string{}
	for _, part := range strings.Split(body, "&") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return fmt.Errorf("InvalidSignature: malformed token")
		}
		fields[k] = v // still URL-encoded
	}
	if fields["skn"] != f.keyName {
		return fmt.Errorf("InvalidSignature: unknown key name %q", fields["skn"])
	}
	mac := hmac.New(sha256.New, []byte(f.key))
	mac.Write([]byte(fields["sr"] + "\n" + fields["se"]))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	sig, err := url.QueryUnescape(fields["sig"])
	if err != nil || !hmac.Equal([]byte(sig), []byte(want)) {
		return fmt.Errorf("InvalidSignature: the signature does not match")
	}
	se, err := strconv.ParseInt(fields["se"], 10, 64)
	if err != nil || time.Unix(se, 0).Before(time.Now()) {
		return fmt.Errorf("ExpiredToken: the token expired")
	}
	sr, err := url.QueryUnescape(fields["sr"])
	if err != nil {
		return fmt.Errorf("InvalidSignature: sr")
	}
	resource := strings.ToLower("https://" + f.namespace + "/" + entity)
	if !strings.HasPrefix(resource, strings.ToLower(strings.TrimSuffix(sr, "/"))) {
		return fmt.Errorf("InvalidAudience: the token is for %s, not %s", sr, resource)
	}
	return nil
}

// Request headers that are not custom properties.
var httpHeaders = map[string]bool{
	"Host": true, "User-Agent": true, "Accept": true, "Accept-Encoding": true, "Content-Length": true,
	"Content-Type": true, "Connection": true, "Authorization": true, "Brokerproperties": true,
	"Transfer-Encoding": true, "Expect": true, "Te": true, "X-Ms-Retrypolicy": true,
}

// infer is the documented type inference of a custom property's text
// (docs/wire-servicebus.md §7): quoted → DateTime if an RFC 2616 date, else String with the
// quotes stripped; unquoted → Boolean (true/false), Int64, Double, or the
// message is rejected.
func infer(name, v string) (fakeProp, error) {
	p := fakeProp{name: name}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		in := v[1 : len(v)-1]
		if t, err := http.ParseTime(in); err == nil {
			p.kind, p.t = "DateTime", t
		} else {
			p.kind, p.s = "String", in
		}
		return p, nil
	}
	if v == "true" || v == "false" {
		p.kind, p.b = "Boolean", v == "true"
		return p, nil
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		p.kind, p.i = "Int64", i
		return p, nil
	}
	if fl, err := strconv.ParseFloat(v, 64); err == nil || v == "NaN" || v == "Infinity" || v == "-Infinity" {
		p.kind, p.f = "Double", fl
		return p, nil
	}
	return p, fmt.Errorf("custom property %q: %q is neither quoted, a boolean, an integer nor a float", name, v)
}

// render writes a property the way the receive examples do: strings and
// dates quoted, the rest bare.
func (p fakeProp) render() string {
	switch p.kind {
	case "String":
		return `"` + p.s + `"`
	case "DateTime":
		return `"` + p.t.UTC().Format(http.TimeFormat) + `"`
	case "Boolean":
		return strconv.FormatBool(p.b)
	case "Int64":
		return strconv.FormatInt(p.i, 10)
	}
	switch {
	case math.IsNaN(p.f):
		return "NaN"
	case math.IsInf(p.f, 1):
		return "Infinity"
	case math.IsInf(p.f, -1):
		return "-Infinity"
	}
	return strings.ToUpper(strconv.FormatFloat(p.f, 'g', -1, 64)) // .NET "R": 1 for 1.0, 1E+300
}

// settable are the BrokerProperties a sender may set (docs/wire-servicebus.md §7).
var settable = []string{"MessageId", "CorrelationId", "SessionId", "Label", "ReplyTo", "To", "ReplyToSessionId", "PartitionKey", "TimeToLive", "ScheduledEnqueueTimeUtc"}

func (f *restFake) parseBP(raw map[string]any) (map[string]any, time.Time, error) {
	bp := map[string]any{}
	var sched time.Time
	for _, k := range settable {
		v, ok := raw[k]
		if !ok {
			continue
		}
		switch k {
		case "TimeToLive":
			n, ok := v.(float64)
			if !ok || n <= 0 {
				return nil, sched, fmt.Errorf("BrokerProperties.TimeToLive: %v is not a positive number of seconds", v)
			}
		case "ScheduledEnqueueTimeUtc":
			s, _ := v.(string)
			t, err := http.ParseTime(s)
			if err != nil {
				return nil, sched, fmt.Errorf("BrokerProperties.ScheduledEnqueueTimeUtc: %q is not an RFC 2616 date", s)
			}
			sched = t
		default:
			if _, ok := v.(string); !ok {
				return nil, sched, fmt.Errorf("BrokerProperties.%s: not a string", k)
			}
		}
		bp[k] = v
	}
	if s, p := bp["SessionId"], bp["PartitionKey"]; s != nil && p != nil && s != p {
		return nil, sched, fmt.Errorf("SessionId and PartitionKey must be equal")
	}
	return bp, sched, nil
}

func (f *restFake) send(w http.ResponseWriter, r *http.Request, entity string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fail(w, http.StatusBadRequest, "body: %v", err)
		return
	}
	var msgs []*fakeMsg
	size := 0
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/vnd.microsoft.servicebus.json") {
		var elems []struct {
			Body             *string
			BrokerProperties map[string]any
			UserProperties   map[string]json.RawMessage
		}
		if err := json.Unmarshal(body, &elems); err != nil {
			fail(w, http.StatusBadRequest, "batch: %v", err)
			return
		}
		size = len(body)
		for i, e := range elems {
			if e.Body == nil {
				fail(w, http.StatusBadRequest, "batch[%d]: no Body", i)
				return
			}
			bp, sched, err := f.parseBP(e.BrokerProperties)
			if err != nil {
				fail(w, http.StatusBadRequest, "batch[%d]: %v", i, err)
				return
			}
			m := &fakeMsg{body: []byte(*e.Body), bp: bp, visibleAt: sched}
			for name, raw := range e.UserProperties {
				p, err := inferJSON(name, raw)
				if err != nil {
					fail(w, http.StatusBadRequest, "batch[%d]: %v", i, err)
					return
				}
				m.props = append(m.props, p)
			}
			msgs = append(msgs, m)
		}
	} else {
		var raw map[string]any
		if h := r.Header.Get("BrokerProperties"); h != "" {
			if err := json.Unmarshal([]byte(h), &raw); err != nil {
				fail(w, http.StatusBadRequest, "BrokerProperties: %v", err)
				return
			}
		}
		bp, sched, err := f.parseBP(raw)
		if err != nil {
			fail(w, http.StatusBadRequest, "%v", err)
			return
		}
		m := &fakeMsg{body: body, contentType: r.Header.Get("Content-Type"), bp: bp, visibleAt: sched}
		size = len(body) + len(r.Header.Get("BrokerProperties"))
		for name, vs := range r.Header {
			if httpHeaders[name] || strings.HasPrefix(name, "X-Ms-") {
				continue
			}
			p, err := infer(name, vs[0])
			if err != nil {
				fail(w, http.StatusBadRequest, "%v", err)
				return
			}
			size += len(name) + len(vs[0])
			m.props = append(m.props, p)
		}
		msgs = append(msgs, m)
	}
	if size > f.maxSize {
		fail(w, http.StatusForbidden, "MessageSizeExceeded: the message size %d exceeds the limit of %d bytes", size, f.maxSize)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	targets := []*fakeEntity{}
	if subs, ok := f.topics[strings.ToLower(entity)]; ok {
		for _, s := range subs {
			targets = append(targets, f.queues[strings.ToLower(entity+"/subscriptions/"+s)])
		}
	} else if q, ok := f.queues[strings.ToLower(entity)]; ok {
		targets = append(targets, q)
	} else {
		fail(w, http.StatusGone, "the entity %s does not exist", entity)
		return
	}
	for _, q := range targets {
		for _, m := range msgs {
			if q.sessions && m.bp["SessionId"] == nil {
				fail(w, http.StatusBadRequest, "the entity requires sessions: SessionId is missing")
				return
			}
		}
	}
	now := time.Now()
	for _, q := range targets {
		for _, m := range msgs {
			c := *m
			f.seq++
			c.seq, c.enqueued = f.seq, now
			q.msgs = append(q.msgs, &c)
		}
		close(q.changed)
		q.changed = make(chan struct{})
	}
	w.WriteHeader(http.StatusCreated)
}

// inferJSON is the batch form of the inference: a string is a quoted
// value, a number without fraction or exponent that fits is Int64, any
// other number Double, true/false Boolean; the rest is rejected.
func inferJSON(name string, raw json.RawMessage) (fakeProp, error) {
	s := strings.TrimSpace(string(raw))
	switch {
	case strings.HasPrefix(s, `"`):
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return fakeProp{}, err
		}
		return infer(name, `"`+str+`"`)
	case s == "true" || s == "false":
		return infer(name, s)
	case s == "null" || strings.HasPrefix(s, "[") || strings.HasPrefix(s, "{"):
		return fakeProp{}, fmt.Errorf("UserProperties.%s: %s is not a property value", name, s)
	}
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return fakeProp{name: name, kind: "Int64", i: i}, nil
		}
	}
	fl, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fakeProp{}, fmt.Errorf("UserProperties.%s: %s", name, s)
	}
	return fakeProp{name: name, kind: "Double", f: fl}, nil
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (f *restFake) peekLock(w http.ResponseWriter, r *http.Request, entity string) {
	timeout := 60 * time.Second
	if s := r.URL.Query().Get("timeout"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			fail(w, http.StatusBadRequest, "timeout %q", s)
			return
		}
		timeout = time.Duration(n) * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		f.mu.Lock()
		q, ok := f.queues[strings.ToLower(entity)]
		if !ok {
			f.mu.Unlock()
			fail(w, http.StatusGone, "the entity %s does not exist", entity)
			return
		}
		if q.sessions {
			f.mu.Unlock()
			fail(w, http.StatusBadRequest, "the entity requires sessions; the REST API has no session receiver")
			return
		}
		now := time.Now()
		var m *fakeMsg
		for _, c := range q.msgs {
			if c.visibleAt.After(now) || c.lockedUntil.After(now) {
				continue
			}
			m = c
			break
		}
		if m != nil {
			m.deliveryCount++
			m.lockToken = newToken()
			m.lockedUntil = now.Add(f.lockDur)
			f.writeMessage(w, r, q, m)
			f.mu.Unlock()
			return
		}
		changed := q.changed
		f.mu.Unlock()
		wait := time.Until(deadline)
		if wait <= 0 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		select {
		case <-changed:
		case <-time.After(min(wait, 100*time.Millisecond)): // locks and schedules lapse
		case <-r.Context().Done():
			return
		}
	}
}

func (f *restFake) writeMessage(w http.ResponseWriter, r *http.Request, q *fakeEntity, m *fakeMsg) {
	bp := map[string]any{}
	for k, v := range m.bp {
		bp[k] = v
	}
	bp["DeliveryCount"] = m.deliveryCount
	bp["EnqueuedSequenceNumber"] = 0
	bp["EnqueuedTimeUtc"] = m.enqueued.UTC().Format(http.TimeFormat)
	bp["LockToken"] = m.lockToken
	bp["LockedUntilUtc"] = m.lockedUntil.UTC().Format(http.TimeFormat)
	bp["SequenceNumber"] = m.seq
	bp["State"] = "Active"
	js, _ := json.Marshal(bp)
	h := w.Header()
	h["BrokerProperties"] = []string{string(js)}
	if m.contentType != "" {
		h.Set("Content-Type", m.contentType)
	}
	loc := "http://" + r.Host + "/" + escapePath(q.path) + "/messages/" + strconv.FormatInt(m.seq, 10) + "/" + m.lockToken
	h.Set("Location", loc)
	for _, p := range m.props {
		h[p.name] = []string{p.render()} // the name as stored
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(m.body)
}

func (f *restFake) lockOp(w http.ResponseWriter, r *http.Request, entity, ref, token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, ok := f.queues[strings.ToLower(entity)]
	if !ok {
		fail(w, http.StatusGone, "the entity %s does not exist", entity)
		return
	}
	now := time.Now()
	for i, m := range q.msgs {
		if strconv.FormatInt(m.seq, 10) != ref && m.bp["MessageId"] != ref {
			continue
		}
		if m.lockToken != token || !m.lockedUntil.After(now) {
			break
		}
		switch r.Method {
		case http.MethodDelete:
			q.msgs = append(q.msgs[:i:i], q.msgs[i+1:]...)
		case http.MethodPut:
			m.lockToken, m.lockedUntil = "", time.Time{}
			close(q.changed)
			q.changed = make(chan struct{})
		case http.MethodPost:
			m.lockedUntil = now.Add(f.lockDur)
		default:
			fail(w, http.StatusMethodNotAllowed, "unsupported")
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	fail(w, http.StatusNotFound, "no message %s with lock %s", ref, token)
}

// stored returns the messages of an entity (for type checks).
func (f *restFake) stored(entity string) []*fakeMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeMsg(nil), f.queues[strings.ToLower(entity)].msgs...)
}

// bearerCred is an azcore.TokenCredential for the fake's bearer token.
type bearerCred struct {
	token string
	calls int
	mu    sync.Mutex
}
