package inject

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Serve serves the webhook at Path on lis, over TLS with cert, until ctx
// is done, and then stops (letting requests in flight finish, for up to
// 5 s). It returns nil once stopped by ctx.
func Serve(ctx context.Context, lis net.Listener, cert *Certificate, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle(Path, Handler(log))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second, // the API server's own webhook timeout is at most 30 s
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cert.GetCertificate},
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	stopped := make(chan struct{})  // ServeTLS returned
	shutDown := make(chan struct{}) // the goroutine below returned
	go func() {                     // waited for by Serve
		defer close(shutDown)
		select {
		case <-ctx.Done():
		case <-stopped:
			return
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.ServeTLS(lis, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	close(stopped)
	<-shutDown
	return err
}
