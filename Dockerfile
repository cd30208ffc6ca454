# probed's image for those who build with docker: the same content as
# `make image` (which needs no docker and no registry): static binaries,
# CA certificates, a non-root user, on scratch.
#   docker build -t probed .
FROM golang:1.26.8 AS build
WORKDIR /src
COPY . .
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags "-s -w" -o /out/ ./cmd/probed ./cmd/probectl \
 && cd kube && go build -trimpath -ldflags "-s -w" -o /out/ ./cmd/probed-kube \
 && mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp /rootfs/home/nonroot \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /rootfs/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /rootfs/etc/group \
 && chmod 1777 /rootfs/tmp && chown 65532:65532 /rootfs/home/nonroot

FROM scratch
COPY --from=build /rootfs/ /
COPY --from=build /out/ /usr/local/bin/
ENV PATH=/usr/local/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
LABEL org.opencontainers.image.title=probed org.opencontainers.image.source=https://github.com/probed/probed
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/probed"]
