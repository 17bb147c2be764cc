# whypending: the bot and CLI in one static binary.
#   docker build --build-arg VERSION=$(git describe --tags --always) --build-arg COMMIT=$(git rev-parse HEAD) -t whypending .
#   docker run --rm -v ~/.kube:/home/nonroot/.kube:ro whypending why-pending -n shop web-7f9c
#   docker run --rm whypending version
# CI (.ci/run) builds the same binary with the same script (hack/build.sh) and runs `whypending version`.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG COMMIT=""
# Static (CGO off), -trimpath, stamped with VERSION and COMMIT: see hack/build.sh.
RUN VERSION=${VERSION} COMMIT=${COMMIT} hack/build.sh /out/whypending

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/whypending /usr/local/bin/whypending
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/whypending"]
CMD ["serve", "--config", "/etc/whypending/config.yaml"]
