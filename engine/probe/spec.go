package probe

// Spec is one probe as a client wrote it: a handler and Kubernetes' timing
// fields plus KEP-3066's milliseconds offsets. Effective turns it into the
// durations the engine uses. A Spec is treated as immutable once handed to
// the engine.
type Spec struct {
	Handler Handler `json:"handler"`

	InitialDelaySeconds int32 `json:"initialDelaySeconds,omitempty"`
	TimeoutSeconds      int32 `json:"timeoutSeconds,omitempty"`
	PeriodSeconds       int32 `json:"periodSeconds,omitempty"`
	SuccessThreshold    int32 `json:"successThreshold,omitempty"`
	FailureThreshold    int32 `json:"failureThreshold,omitempty"`

	InitialDelayMilliseconds *int32 `json:"initialDelayMilliseconds,omitempty"`
	TimeoutMilliseconds      *int32 `json:"timeoutMilliseconds,omitempty"`
	PeriodMilliseconds       *int32 `json:"periodMilliseconds,omitempty"`

	InitializationFailureThreshold *int32 `json:"initializationFailureThreshold,omitempty"`

	// InitialPeriodSeconds and InitialPeriodMilliseconds give the period
	// used until the probe first passes ("fast until ready"). Both unset
	// means the period.
	InitialPeriodSeconds      *int32 `json:"initialPeriodSeconds,omitempty"`
	InitialPeriodMilliseconds *int32 `json:"initialPeriodMilliseconds,omitempty"`
}

// UsesMilliseconds reports whether any *Milliseconds field is set (the
// fields the SubSecondProbes gate controls).
func (s *Spec) UsesMilliseconds() bool {
	return s != nil && (s.InitialDelayMilliseconds != nil || s.TimeoutMilliseconds != nil ||
		s.PeriodMilliseconds != nil || s.InitialPeriodMilliseconds != nil)
}

// Handler is the check a probe runs; exactly one field is set.
type Handler struct {
	HTTPGet   *HTTPGet   `json:"httpGet,omitempty"`
	TCPSocket *TCPSocket `json:"tcpSocket,omitempty"`
	GRPC      *GRPC      `json:"grpc,omitempty"`
	Exec      *Exec      `json:"exec,omitempty"`
}

// Scheme is the scheme of an HTTP probe.
type Scheme string

// The HTTP schemes.
const (
	SchemeHTTP  Scheme = "HTTP"
	SchemeHTTPS Scheme = "HTTPS"
)

// HTTPGet succeeds when GET answers 200 <= status < 400 and, when
// ExpectedBody is set, the body equals it.
type HTTPGet struct {
	Host             string   `json:"host"`
	Port             int32    `json:"port"`
	Path             string   `json:"path,omitempty"`
	Scheme           Scheme   `json:"scheme,omitempty"` // "" means HTTP
	Headers          []Header `json:"httpHeaders,omitempty"`
	ExpectedBody     string   `json:"expectedBody,omitempty"`
	DisableKeepAlive bool     `json:"disableKeepAlive,omitempty"`
	TLS              *TLS     `json:"tls,omitempty"`
}

// Header is one HTTP request header.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// TLS tunes certificate verification of a probe's connection.
type TLS struct {
	CAPEM              string `json:"caPem,omitempty"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify,omitempty"`
	ServerName         string `json:"serverName,omitempty"`
}

// TCPSocket succeeds when a connection opens.
type TCPSocket struct {
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// GRPC calls grpc.health.v1.Health/Check; only SERVING succeeds. TLS, when
// set, turns TLS on.
type GRPC struct {
	Host    string  `json:"host"`
	Port    int32   `json:"port"`
	Service *string `json:"service,omitempty"`
	TLS     *TLS    `json:"tls,omitempty"`
}

// Exec runs Command; exit status 0 succeeds.
type Exec struct {
	Command []string `json:"command"`
}
